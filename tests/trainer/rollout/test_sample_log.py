"""`rollouts.jsonl` lines (`scalerl.trainer.rollout.sample_log.RolloutLog`): the verdict's details go in, bounded.

The code verdict is the real `CodeVerifier`'s (real sandbox) on a program that prints and then fails, so
the line carries exactly what the verifier reports: the failing test's stdout head and stderr tail.
"""

from __future__ import annotations

import json

import pytest
from scalerl.env.contracts.records import ProblemRecord, Status, Verdict, VerifyItem
from scalerl.trainer.config.data import RolloutLogConfig
from scalerl.trainer.engines.base import GeneratedSample
from scalerl.trainer.rollout.messages import RolloutGroup
from scalerl.trainer.rollout.sample_log import DETAIL_BUDGET, DETAIL_ITEMS, DETAIL_KEYS, RolloutLog, bounded_details

PROGRAM = "```python\nprint('partial answer ' * 40)\nraise ValueError('boom at the end')\n```"
TESTS = {"kind": "stdio", "cases": [{"input": "", "output": "42\n"}]}


def group(problem: ProblemRecord, completion: str, verdict: Verdict) -> RolloutGroup:
    sample = GeneratedSample(sample_index=0, token_ids=[1, 2, 3], logprobs=[0.0] * 3, policy_versions=[4, 4, 5],
                             loss_mask=[1] * 3, finish_reason="stop")
    return RolloutGroup(group_id=0, problem=problem, prompt_token_ids=[9], samples=[sample],
                        completions=[completion], verdicts=[verdict], submitted_version=4, submitted_at=0.0,
                        finished_at=1.0)


@pytest.fixture(scope="module")
def code_verdict() -> Verdict:
    from scalerl.verifiers.code.judge import CodeVerifier

    with CodeVerifier() as v:
        (verdict,) = v.verify_many([VerifyItem(id="c", domain="code", completion=PROGRAM, tests=TESTS)])
    assert verdict.status is Status.wrong, verdict.details
    return verdict


def test_a_code_line_carries_the_sandbox_output_cut_to_max_chars(tmp_path, code_verdict):
    problem = ProblemRecord(prompt_id="code-1", domain="code", source="t", prompt=[{"role": "user", "content": "x"}],
                            tests=TESTS)
    log = RolloutLog(tmp_path, RolloutLogConfig(max_chars=64))
    log.observe_step(3, [group(problem, PROGRAM, code_verdict)])
    (line,) = [json.loads(x) for x in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    d = line["details"]
    assert d["stdout_head"] == code_verdict.details["stdout_head"][:64] and d["stdout_head"].startswith("partial")
    assert len(code_verdict.details["stdout_head"]) > 64  # so the cut is exercised
    assert d["stderr_tail"] == code_verdict.details["stderr_tail"][-64:] and "boom at the end" in d["stderr_tail"]
    assert d["tests"][0]["outcome"] == "runtime_error" and (d["passed"], d["total"]) == (0, 1)
    assert (line["status"], line["step"], line["policy_versions"]) == ("wrong", 3, [4, 5])


def string_values(v) -> list[str]:
    if isinstance(v, str):
        return [v]
    items = v.values() if isinstance(v, dict) else v if isinstance(v, list) else []
    return [s for x in items for s in string_values(x)]


def test_details_stay_bounded_whatever_the_verifier_returns():
    huge = {"a": "x" * 10_000, "b": ["y" * 10] * 100, "c": {"d": {"e": {"f": {"g": "deep"}}}}, "n": float("nan"),
            "obj": object(), **{f"k{i}": "z" * 100 for i in range(100)}}
    out = bounded_details(huge, 100)
    json.dumps(out, allow_nan=False)  # JSON-safe: no NaN, no objects
    assert len(out["a"]) == 100 and len(out["b"]) == DETAIL_ITEMS and all(len(s) == 10 for s in out["b"])
    assert isinstance(out["c"]["d"]["e"], dict) and out["c"]["d"]["e"]["f"] == "{'g': 'deep'}"  # 4 levels, then str
    assert out["n"] == "nan" and out["obj"].startswith("<object")
    assert len(out) == DETAIL_KEYS and "k99" not in out
    assert sum(map(len, string_values(out))) == DETAIL_BUDGET * 100  # the budget is spent, then strings are empty
    assert 0 < len(out["k0"]) < 100 and out["k1"] == out["k26"] == ""
