"""`scalerl-env ledger rescore` after a verifier change: the exact flips per domain and rule, the originals
untouched, the new verdicts readable as their own verifier version (`ledger stats --verifier-version`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from scalerl.curriculum.ledger.ledger_config import LedgerConfig
from scalerl.curriculum.ledger.store import Ledger
from scalerl.env.contracts.records import ProblemRecord
from scalerl.verifiers.batch import VerifierPool
from scalerl.verifiers.verifier_config import VerifierConfig

BIN = Path(sys.executable).parent
LOWERCASE = json.dumps({"instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]})
# The settings the run was scored with; the rescore runs with the defaults and if.mode=loose.
RUN_SETTINGS = {"math": {"answer_format": "boxed", "question_forms": False}, "if": {"mode": "strict"}}


def problem(pid: str, domain: str, answer: str, question: str = "Solve it.") -> ProblemRecord:
    return ProblemRecord(prompt_id=pid, domain=domain, source="test", answer=answer,
                         prompt=[{"role": "user", "content": question}])


# (problem, completion): what each does when the settings change from RUN_SETTINGS to the rescore's
CASES = [
    # boxed-only scoring finds no answer; the default reads the phrase: wrong -> correct (rule fast_path)
    (problem("phrase", "math", "2"), "The answer is 2."),
    # the question's form was not checked; by default a decimal is not a common fraction: correct -> wrong,
    # counted under the rule that had accepted it (fast_path)
    (problem("fraction", "math", "\\frac{1}{2}", "What is 1/2? Express your answer as a common fraction."),
     "\\boxed{0.5}"),
    (problem("same", "math", "2"), "\\boxed{2}"),  # unchanged
    # strict IFEval fails the capital first line; loose drops it: wrong -> correct (no rule named)
    (problem("lower", "if", LOWERCASE),
     "Sure! Here it is.\nthe quick brown fox jumps over the lazy dog and then it runs far away from the farm"),
]


def scalerl_env(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "scalerl-env"), *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def run_ledger(tmp_path_factory) -> Path:
    """A ledger as a run with `ledger.store_completions` on leaves it, plus an attempt without a stored
    completion and one whose problem the ledger does not know."""
    path = tmp_path_factory.mktemp("rescore") / "ledger.duckdb"
    items = [p.verify_item(c, step=1) for p, c in CASES]
    with VerifierPool(VerifierConfig.model_validate(RUN_SETTINGS)) as pool:
        verdicts = pool.verify_batch(items)
        stranger = ProblemRecord(prompt_id="stranger", domain="math", source="elsewhere", answer="2",
                                 prompt=[{"role": "user", "content": "?"}]).verify_item("\\boxed{2}")
        verdicts += pool.verify_batch([stranger])
    assert [v.status.value for v in verdicts] == ["no_answer", "correct", "correct", "wrong", "correct"]
    with Ledger(path, config=LedgerConfig(store_completions=True)) as ledger:
        ledger.upsert_problems([p for p, _ in CASES])
        ledger.record([*items, stranger], verdicts)
        ledger.record_attempts([{"prompt_id": "same", "domain": "math", "status": "correct"}])  # no completion
    return path


def test_rescore_reports_the_flips_per_domain_and_rule_and_keeps_the_originals(run_ledger):
    with Ledger(run_ledger, read_only=True) as ledger:
        before = ledger.query("SELECT * FROM attempts ORDER BY attempt_id").rows
        original_versions = ledger.query("SELECT DISTINCT domain, verifier_version, settings_digest FROM attempts "
                                         "WHERE verifier_version IS NOT NULL ORDER BY domain").rows
    done = scalerl_env("ledger", "rescore", "--ledger", str(run_ledger), "--json", "if.mode=loose")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["domains"]
    math, ifeval = report["math"], report["if"]
    assert {k: math[k] for k in ("rescored", "unchanged", "correct_to_wrong", "wrong_to_correct", "no_completion",
                                 "no_reference")} == {"rescored": 3, "unchanged": 1, "correct_to_wrong": 1,
                                                      "wrong_to_correct": 1, "no_completion": 1, "no_reference": 1}
    assert math["by_rule"] == {"fast_path": {"correct_to_wrong": 1, "wrong_to_correct": 1}}
    assert (ifeval["rescored"], ifeval["wrong_to_correct"], ifeval["correct_to_wrong"]) == (1, 1, 0)
    assert ifeval["by_rule"] == {"(none)": {"correct_to_wrong": 0, "wrong_to_correct": 1}}
    # the code did not change, the settings did: same version, another digest
    for domain, version, digest in original_versions:
        assert report[domain]["verifier_version"] == version and report[domain]["settings_digest"] != digest
    with Ledger(run_ledger, read_only=True) as ledger:
        assert ledger.query("SELECT * FROM attempts ORDER BY attempt_id").rows == before
        rescored = ledger.query("SELECT prompt_id, status FROM rescores ORDER BY attempt_id").rows
        assert rescored == [["phrase", "correct"], ["fraction", "wrong"], ["same", "correct"], ["lower", "correct"]]

    text = scalerl_env("ledger", "rescore", "--ledger", str(run_ledger), "--domain", "if", "if.mode=loose")
    assert text.returncode == 0, text.stderr
    assert "if: 1 rescored" in text.stdout and "wrong → correct 1" in text.stdout and "math" not in text.stdout
    with Ledger(run_ledger, read_only=True) as ledger:  # the same version again replaced its rows
        assert ledger.query("SELECT count(*) FROM rescores").rows == [[4]]


def test_pass_rates_of_one_verifier_version(run_ledger):
    assert scalerl_env("ledger", "rescore", "--ledger", str(run_ledger), "if.mode=loose").returncode == 0
    with Ledger(run_ledger, read_only=True) as ledger:
        [[version]] = ledger.query("SELECT DISTINCT verifier_version FROM attempts WHERE domain = 'math' "
                                   "AND verifier_version IS NOT NULL").rows
        digests = ledger.query("SELECT settings_digest, sum(correct), sum(scored) FROM version_pass_rates "
                               f"WHERE verifier_version = '{version}' AND domain = 'math' GROUP BY ALL").rows
    # the run's settings: 3 of 4 math verdicts correct (the stranger's too); the rescore's: 2 of 3
    assert sorted((int(c), int(s)) for _, c, s in digests) == [(2, 3), (3, 4)]
    shown = scalerl_env("ledger", "stats", "--ledger", str(run_ledger), "--verifier-version", version)
    assert shown.returncode == 0, shown.stderr
    assert f"verifier version {version}" in shown.stdout and "0.6667" in shown.stdout and "0.75" in shown.stdout
    unknown = scalerl_env("ledger", "stats", "--ledger", str(run_ledger), "--verifier-version", "nope")
    assert unknown.returncode == 2 and "no verdicts of verifier version 'nope'" in unknown.stderr


def test_rescore_refuses_what_it_cannot_do(tmp_path, run_ledger):
    missing = scalerl_env("ledger", "rescore", "--ledger", str(tmp_path / "none.duckdb"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    bad = scalerl_env("ledger", "rescore", "--ledger", str(run_ledger), "--domain", "chemistry")
    assert bad.returncode == 2 and "unknown domain" in bad.stderr
    typo = scalerl_env("ledger", "rescore", "--ledger", str(run_ledger), "math.nope=1")
    assert typo.returncode == 2 and "nope" in typo.stderr
