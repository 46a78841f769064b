"""The built-in domain specs: hooks a reader can follow, a registry that stays cheap to load, typed
verifier sections for every built-in domain, and the spec as the one source of the prompt instruction."""

from __future__ import annotations

import inspect
import subprocess
import sys
from importlib.metadata import entry_points

import pytest
from scalerl.env.contracts.config_loader import dump_yaml, load_config, reference_markdown
from scalerl.env.contracts.domains import ENTRY_POINT_GROUP, DomainSpec, domain, domains
from scalerl.verifiers.verifier_config import IfConfig, MathConfig, VerifierConfig

BUILT_IN = {ep.name: ep.value.partition(":")[0] for ep in entry_points(group=ENTRY_POINT_GROUP)
            if ep.value.startswith("scalerl.env.domains.")}
HOOKS = ("verifier", "verifier_config", "check_reference", "generator_families", "row_reference", "claims_reference")


def test_every_built_in_domain_is_declared():
    assert set(BUILT_IN) <= set(domains()) and len(BUILT_IN) >= 3


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_built_in_hooks_are_named_functions_of_the_spec_module(name):
    """No `"module:attr"` strings or lambdas: each hook is a function defined beside the spec."""
    spec = domain(name)
    for hook in (getattr(spec, field) for field in HOOKS):
        if hook is not None:
            assert inspect.isfunction(hook) and hook.__module__ == BUILT_IN[name], (name, hook)
            assert hook.__name__ != "<lambda>", (name, hook)


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_the_verifier_hook_builds_the_verifier_of_the_domain_home(name):
    verifier = domain(name).verifier(VerifierConfig(math=MathConfig(workers=1)))
    try:
        module = type(verifier).__module__  # scalerl.verifiers.<home>.verifier
        assert module.startswith("scalerl.verifiers.") and module.endswith(".verifier"), module
    finally:
        verifier.close()


def test_loading_the_registry_and_the_verifier_settings_imports_no_domain_code():
    code = ("import sys\n"
            "from scalerl.env.contracts.domains import domains\n"
            "from scalerl.verifiers.verifier_config import VerifierConfig\n"
            "specs = domains(); VerifierConfig()\n"
            "heavy = ('scalerl.verifiers.math.', 'scalerl.verifiers.code.', 'scalerl.verifiers.ifeval.',\n"
            "         'scalerl.env.sources', 'sympy', 'math_verify', 'langdetect', 'datasets')\n"
            "loaded = sorted(m for m in sys.modules if m.startswith(heavy))\n"
            "assert len(specs) >= 3 and not loaded, loaded\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_if_section_is_typed_and_round_trips_through_the_resolved_yaml(tmp_path):
    cfg = load_config(VerifierConfig, None, ["if.mode=loose", "if.reward=fraction"])
    assert isinstance(cfg.section("if"), IfConfig) and cfg.section("if") is cfg.if_
    assert (cfg.if_.mode, cfg.if_.reward) == ("loose", "fraction")
    assert "if" in cfg.model_dump(mode="json") and "if_" not in cfg.model_dump(mode="json")
    path = tmp_path / "verifier.yaml"
    path.write_text(dump_yaml(cfg))
    assert load_config(VerifierConfig, path) == cfg
    with pytest.raises(ValueError, match="if.colour"):
        load_config(VerifierConfig, None, ["if.colour=red"])


def test_the_configuration_reference_lists_the_if_settings():
    keys = {row.split("`")[1] for row in reference_markdown(VerifierConfig)}
    assert {f"if.{k}" for k in IfConfig.model_fields} <= keys and "if_.mode" not in str(keys)


def test_a_spec_prompt_is_immutable():
    """The spec's template is shared by every run that does not override it: nobody may change it."""
    spec: DomainSpec = domain("math")
    with pytest.raises(ValueError):
        spec.prompt.instruction = "changed"  # type: ignore[misc]
