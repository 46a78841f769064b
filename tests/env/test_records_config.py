"""Records and the config helper: the contracts every package relies on."""

from __future__ import annotations

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from scalerl.env.contracts.config_loader import ConfigError, load_config, write_resolved
from scalerl.env.contracts.records import ProblemRecord, Status, Verdict, VerifyItem, make_prompt_id


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    eps_max: float = 5.0
    name: str = "cispo"


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    loss: Inner = Field(default_factory=Inner)
    steps: int = 10


def test_verdict_reward_follows_table():
    assert Verdict.of("correct").reward == 1.0
    assert Verdict.of(Status.timeout).reward == 0.0


def test_verify_item_rejects_unknown_field():
    with pytest.raises(ValidationError, match="answr"):
        VerifyItem.model_validate({"domain": "math", "completion": "x", "answer": "1", "answr": "2"})


def test_code_item_needs_tests_and_parses_kind():
    with pytest.raises(ValidationError, match="tests"):
        VerifyItem(domain="code", completion="print(1)")
    item = VerifyItem.model_validate(
        {"domain": "code", "completion": "x", "tests": {"kind": "stdio", "cases": [{"input": "1", "output": "1"}]}}
    )
    assert item.tests.kind == "stdio" and item.tests.compare == "tokens"


def test_prompt_id_is_stable_and_whitespace_insensitive():
    a = make_prompt_id("gsm8k", [{"role": "user", "content": "What is  1+1?"}])
    b = make_prompt_id("gsm8k", [{"role": "user", "content": "What is 1+1? "}])
    assert a == b and len(a) == 16
    assert make_prompt_id("math", [{"role": "user", "content": "What is 1+1?"}]) != a


def test_problem_record_builds_verify_item():
    rec = ProblemRecord(
        prompt_id="p1", domain="math", source="s", prompt=[{"role": "user", "content": "1+1?"}], answer="2"
    )
    item = rec.verify_item("\\boxed{2}", step=3)
    assert item.prompt_id == "p1" and item.answer == "2" and item.step == 3


def test_config_layers_defaults_yaml_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"loss": {"eps_max": 4.0}, "steps": 3}))
    cfg = load_config(Outer, path, ["loss.name=dapo", "steps=7"])
    assert (cfg.loss.eps_max, cfg.loss.name, cfg.steps) == (4.0, "dapo", 7)
    out = write_resolved(cfg, tmp_path / "run" / "config.yaml")
    assert yaml.safe_load(out.read_text()) == {"loss": {"eps_max": 4.0, "name": "dapo"}, "steps": 7}


def test_config_unknown_key_names_dotted_path():
    with pytest.raises(ConfigError, match="loss.eps_mx"):
        load_config(Outer, None, ["loss.eps_mx=3"])


def test_config_bad_override_syntax():
    with pytest.raises(ConfigError, match="key.path=value"):
        load_config(Outer, None, ["loss.eps_max"])


def test_problem_limits_reach_the_verify_item():
    rec = ProblemRecord(
        prompt_id="c1", domain="code", source="taco", prompt=[{"role": "user", "content": "echo"}],
        tests={"kind": "stdio", "cases": [{"input": "1\n", "output": "1\n"}]}, limits={"time_s": 7},
    )
    assert rec.verify_item("print(input())").limits.time_s == 7
