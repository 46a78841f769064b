"""The live second opinion on negative verdicts, through the real pool: plain math-verify in the math
workers, IFEval's loose mode, a code timeout run again with a longer limit; deterministic sampling; the
verdict's status and reward never change."""

from __future__ import annotations

import json

import pytest
from scalerl.env.contracts.records import Limits, VerifyItem
from scalerl.verifiers import VerifierPool
from scalerl.verifiers.code.verifier import longer_limits
from scalerl.verifiers.second_opinion import sampled
from scalerl.verifiers.verifier_config import CodeConfig, VerifierConfig

ALL = {"math": {"workers": 1, "second_opinion": 1.0}, "code": {"second_opinion": 1.0}, "if": {"second_opinion": 1.0}}
NONE = {"math": {"workers": 1, "second_opinion": 0.0}, "code": {"second_opinion": 0.0}, "if": {"second_opinion": 0.0}}
# The project's guard rejects what plain math-verify calls equal: (a - b).evalf(chop=True) == 0 for tiny numbers.
GUARDED = {"domain": "math", "answer": "\\frac{1}{2^{98}}", "completion": "so \\boxed{\\frac{1}{2^{99}}}"}
BOTH_WRONG = {"domain": "math", "answer": "3", "completion": "so \\boxed{4}"}
RIGHT = {"domain": "math", "answer": "3", "completion": "so \\boxed{3}"}
END = json.dumps({"instruction_id_list": ["startend:end_checker"], "kwargs": [{"end_phrase": "Any other questions?"}]})
LOOSE_ONLY = {"domain": "if", "answer": END, "completion": "Done. **Any other questions?**"}  # strict: the ** end it
IF_WRONG = {"domain": "if", "answer": END, "completion": "Done."}
# Burns 0.75 s of CPU, then echoes: a timeout at time_s 0.5 that the 4x re-run passes; the loop never ends.
SLOW = ("import time\nt0 = time.process_time()\nwhile time.process_time() - t0 < 0.75:\n    pass\nprint(input())\n")
ECHO = {"kind": "stdio", "cases": [{"input": "5\n", "output": "5\n"}]}
SLOW_CODE = {"domain": "code", "completion": SLOW, "tests": ECHO, "limits": {"time_s": 0.5}}
LOOP_CODE = {"domain": "code", "completion": "while True:\n    pass\n", "tests": ECHO, "limits": {"time_s": 0.25}}
ITEMS = [GUARDED, BOTH_WRONG, RIGHT, LOOSE_ONLY, IF_WRONG, SLOW_CODE, LOOP_CODE]


def score(settings: dict, items: list[dict]) -> list:
    with VerifierPool(VerifierConfig.model_validate(settings)) as pool:
        return pool.verify_batch([{"id": str(i), **item} for i, item in enumerate(items)])


@pytest.fixture(scope="module")
def checked_and_plain():
    return score(ALL, ITEMS), score(NONE, ITEMS)


def test_each_domain_s_second_judge_accepts_or_rejects(checked_and_plain) -> None:
    checked, _ = checked_and_plain
    opinions = [(v.status.value, v.details.get("second_opinion"), v.details.get("second_opinion_by")) for v in checked]
    assert opinions == [
        ("wrong", "accepts", "plain_math_verify"), ("wrong", "rejects", "plain_math_verify"), ("correct", None, None),
        ("wrong", "accepts", "ifeval_loose"), ("wrong", "rejects", "ifeval_loose"),
        ("timeout", "accepts", "code_longer_time_limit"), ("timeout", "rejects", "code_longer_time_limit")]


def test_status_and_reward_never_change_and_fraction_zero_checks_nothing(checked_and_plain) -> None:
    checked, plain = checked_and_plain
    assert [(v.status, v.reward) for v in checked] == [(v.status, v.reward) for v in plain]
    assert not any("second_opinion" in v.details for v in plain)


def test_the_sample_is_deterministic_and_near_the_fraction() -> None:
    items = [VerifyItem(domain="math", answer="3", completion=f"\\boxed{{{n}}}", prompt_id="p") for n in range(2000)]
    first = [sampled(item, 0.1) for item in items]
    assert first == [sampled(item, 0.1) for item in items]
    assert 150 < sum(first) < 250
    assert not any(sampled(item, 0.0) for item in items) and all(sampled(item, 1.0) for item in items)
    other = [sampled(item.model_copy(update={"prompt_id": "q"}), 0.1) for item in items]
    assert other != first  # the prompt is part of the draw


def test_a_sampled_share_is_checked_the_same_way_twice() -> None:
    settings = {"math": {"workers": 1, "second_opinion": 0.5}}
    items = [{"domain": "math", "answer": "3", "completion": f"\\boxed{{{n}}}", "prompt_id": "p"}
             for n in range(10, 30)]
    first, second = score(settings, items), score(settings, items)
    marks = [v.details.get("second_opinion") for v in first]
    assert marks == [v.details.get("second_opinion") for v in second]
    assert 0 < sum(m == "rejects" for m in marks) < len(items)


def test_the_longer_limit_is_bounded_by_what_an_item_may_set() -> None:
    config = CodeConfig()
    assert longer_limits(Limits(time_s=0.5), config).time_s == pytest.approx(0.5 * config.second_opinion_time_factor)
    assert longer_limits(Limits(time_s=50), config).time_s == 60
    assert longer_limits(None, config).memory_mb == Limits().memory_mb


def test_math_queues_its_plain_runs_with_the_verdicts_not_after_them() -> None:
    # no answer, a fast-path `wrong`, and a sympy `wrong`: each sampled negative gets its plain run
    items = [VerifyItem.model_validate({"domain": "math", "answer": answer, "completion": text}) for answer, text
             in (("3", "I give up."), ("3", "so \\boxed{4}"), ("(x+1)^2", "so \\boxed{x^2+2x}"))]
    with VerifierPool(VerifierConfig.model_validate(ALL)) as pool:
        math = pool._verifiers["math"]
        before = math.info()["requests"]
        collect = math.submit(items)
        queued = math.info()["requests"] - before  # before anything is collected
        verdicts = collect()
        total = math.info()["requests"] - before
    assert queued >= 3  # the sympy pair and the two plain runs decided here are in flight at once
    assert total == 4  # and the sympy `wrong` adds its plain run from its reply, no round after the verdicts
    assert [(v.status.value, v.details.get("path"), v.details.get("second_opinion")) for v in verdicts] == [
        ("no_answer", None, "rejects"), ("wrong", "fast", "rejects"), ("wrong", "sympy", "rejects")]
    assert all(v.details["second_opinion_by"] == "plain_math_verify" for v in verdicts)


@pytest.mark.parametrize("answer,path", [("\\frac{2.5}{4.5}", "fast"), ("\\frac{2.5x}{4.5x}", "sympy")])
def test_a_value_a_required_form_rejects_gets_the_second_opinion_too(answer: str, path: str) -> None:
    item = {"domain": "math", "answer": "\\frac 59", "completion": f"so \\boxed{{{answer}}}",
            "question": "What is x? Express your answer as a common fraction."}
    settings = {"math": {**ALL["math"], "question_forms": True}}
    [verdict] = score(settings, [item])
    assert (verdict.status.value, verdict.details["rule"], verdict.details["path"]) == ("wrong", "form_fraction", path)
    assert verdict.details["second_opinion"] in ("accepts", "rejects")


def test_a_worker_s_wider_math_verify_parse_caches_give_the_same_plain_verdicts(monkeypatch) -> None:
    from math_verify import parser
    from scalerl.verifiers.math import worker

    cases = [("3", "so \\boxed{3}"), ("\\frac{1}{2}", "we get $0.5$"), ("(x+1)^2", "so \\boxed{x^2+2x}"), ("3", "none")]
    before = [worker.plain_math_verify(*case) for case in cases]
    for name in ("parse_latex_cached", "parse_expr_cached"):
        monkeypatch.setattr(parser, name, getattr(parser, name))  # restored after the test
    worker._widen_parse_caches(64)
    assert parser.parse_latex_cached.cache_info().maxsize == 64
    for _ in range(2):  # the second pass is served from the wider cache
        assert [worker.plain_math_verify(*case) for case in cases] == before
    assert parser.parse_latex_cached.cache_info().hits > 0


def test_review_starts_a_judge_with_a_start_and_leaves_one_given_with_the_verdicts_alone() -> None:
    from scalerl.env.contracts.records import Status, Verdict
    from scalerl.verifiers.math.verifier import SECOND_JUDGE
    from scalerl.verifiers.second_opinion import SecondJudge, review

    class PlugIn:  # a domain verifier outside the project: the generic path
        def second_judge(self) -> SecondJudge:
            return SecondJudge(frozenset({Status.wrong}), "plug_in", lambda items, _: lambda: [True] * len(items))

    class GivesItsOwn:  # math: its verdicts carry the opinion already
        def second_judge(self) -> SecondJudge:
            return SECOND_JUDGE

    config = VerifierConfig.model_validate(ALL)
    items = [VerifyItem.model_validate(IF_WRONG), VerifyItem.model_validate(BOTH_WRONG)]
    verdicts = [Verdict.of(Status.wrong, rewards=config.rewards) for _ in items]
    out = review(items, verdicts, config, {"if": PlugIn(), "math": GivesItsOwn()})
    assert [(v.details.get("second_opinion"), v.details.get("second_opinion_by")) for v in out] == [
        ("accepts", "plug_in"), (None, None)]
