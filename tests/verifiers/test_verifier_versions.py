"""Every verdict names its verifier: the code version of the domain's verifier package (a source edit is a
new version) and the digest of the domain's settings (a changed setting is a new digest)."""

from __future__ import annotations

import sys

from scalerl.env.contracts.records import RewardTable
from scalerl.verifiers.batch import VerifierPool
from scalerl.verifiers.verifier_config import IfConfig, MathConfig, VerifierConfig
from scalerl.verifiers.versions import code_version, settings_digest

ITEMS = [{"domain": "math", "completion": "\\boxed{2}", "answer": "2"},
         {"domain": "math", "completion": "no answer here", "answer": "2"},
         {"domain": "code", "completion": "print(1)",
          "tests": {"kind": "stdio", "cases": [{"input": "", "output": "1"}]}}]


def test_every_verdict_carries_its_domains_version_and_digest():
    with VerifierPool() as pool:
        verdicts = pool.verify_batch(ITEMS)
    stamps = [(v.details["verifier_version"], v.details["settings_digest"]) for v in verdicts]
    assert stamps[0] == stamps[1] != stamps[2]  # one per domain, whatever the status
    assert stamps[0][0].startswith("scalerl-") and stamps[2][0].startswith("scalerl-")
    assert stamps[0][0] == code_version("scalerl.verifiers.math.verifier")
    assert stamps[0][1] == settings_digest(MathConfig(), RewardTable())


def test_a_setting_changes_only_its_own_domains_digest():
    base = VerifierConfig()
    loose = VerifierConfig.model_validate({"if": {"mode": "loose"}})
    assert settings_digest(loose.section("if"), loose.rewards) != settings_digest(IfConfig(), base.rewards)
    assert settings_digest(loose.section("math"), loose.rewards) == settings_digest(base.section("math"), base.rewards)
    shaped = RewardTable(wrong=-1.0)
    assert settings_digest(MathConfig(), shaped) != settings_digest(MathConfig(), RewardTable())


def test_an_edit_of_the_verifier_package_is_a_new_version(tmp_path, monkeypatch):
    package = tmp_path / "toy_verifier"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "verifier.py").write_text("RULE = 'a'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = code_version("toy_verifier.verifier")
    assert first.startswith("unversioned+")  # no distribution installs it
    (package / "rules.py").write_text("RULE = 'b'\n")  # any file of the package counts
    code_version.cache_clear()
    try:
        assert code_version("toy_verifier.verifier") != first
    finally:
        code_version.cache_clear()
        for name in [m for m in sys.modules if m.startswith("toy_verifier")]:
            del sys.modules[name]
