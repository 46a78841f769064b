"""The verdict memo per batch: repeated work in a group with repeats is done once per domain, and every
copy equals what scoring it would give (its own id, `details.deduplicated`), stamped and reviewed by the
batch API like any verdict."""

from __future__ import annotations

import json

import pytest
from scalerl.env.contracts.records import Status, VerifyItem
from scalerl.verifiers import VerifierPool
from scalerl.verifiers.code.judge import CodeVerifier
from scalerl.verifiers.ifeval import verifier as if_verifier
from scalerl.verifiers.verifier_config import VerifierConfig

STDIO = {"kind": "stdio", "cases": [{"input": "2\n", "output": "4\n"}, {"input": "3\n", "output": "9\n"}]}
SQUARE, DOUBLE = "n = int(input())\nprint(n * n)", "n = int(input())\nprint(n + n)"


def code_item(i: int, completion: str, **kw) -> VerifyItem:
    return VerifyItem(id=f"c{i}", domain="code", completion=completion, tests=STDIO, **kw)


def without_memo_fields(verdict) -> dict:
    """A verdict's fields a caller reads, less those a copy may differ in (its id, the mark, the time)."""
    details = {k: v for k, v in verdict.details.items() if k != "deduplicated"}
    for test in details.get("tests", []):
        test.pop("cpu_s", None), test.pop("wall_s", None)
    return {"status": verdict.status, "reward": verdict.reward, "details": details}


def test_code_runs_one_program_once_per_batch_whatever_prose_wraps_it():
    # A group of six samples: two programs, each in several wordings, one with a different time limit.
    completions = [f"```python\n{SQUARE}\n```", f"Here it is:\n```python\n{SQUARE}\n```", SQUARE,
                   f"```python\n{DOUBLE}\n```", f"Try:\n```py\n{DOUBLE}\n```"]
    items = [code_item(i, text) for i, text in enumerate(completions)]
    items.append(code_item(5, SQUARE, limits={"time_s": 3}))  # other limits: its own run
    with CodeVerifier() as verifier:
        verdicts = verifier.verify_many(items)
        runs = verifier.info()["executions"]
        statuses = verifier.info()["statuses"]
    assert runs == 2 + 2 + 2  # one run per case of each distinct (program, limits); 12 without the memo
    assert [v.status for v in verdicts] == [Status.correct] * 3 + [Status.wrong] * 2 + [Status.correct]
    assert [v.id for v in verdicts] == [item.id for item in items]
    assert [bool(v.details.get("deduplicated")) for v in verdicts] == [False, True, True, False, True, False]
    assert statuses == {"correct": 4, "wrong": 2}  # every verdict counted, copies too
    with CodeVerifier() as alone:  # each copy is what scoring it alone gives
        for item, verdict in zip(items, verdicts):
            assert without_memo_fields(alone.verify_one(item)) == without_memo_fields(verdict)


def test_if_checks_one_response_once_per_batch_whatever_reasoning_precedes_it(monkeypatch):
    calls = []
    real = if_verifier.followed
    monkeypatch.setattr(if_verifier, "followed", lambda *a: calls.append(a[0]) or real(*a))
    reference = json.dumps({"func_name": "validate_lowercase"})
    other = json.dumps({"func_name": "validate_uppercase"})
    completions = ["<think>hm</think>all lower", "<think>let me see</think>all lower", "all lower",
                   "<think>x</think>Not Lower", "Not Lower"]
    items = [VerifyItem(id=f"i{n}", domain="if", completion=c, answer=reference) for n, c in enumerate(completions)]
    items.append(VerifyItem(id="i5", domain="if", completion="all lower", answer=other))  # another reference
    verifier = if_verifier.IfBatchVerifier(VerifierConfig().if_, VerifierConfig().rewards)
    verdicts = verifier.submit(items)()
    # strict per distinct (response, reference), loose only where strict fails: 1 + 2 + 2
    assert len(calls) == 5
    assert [v.status for v in verdicts] == [Status.correct] * 3 + [Status.wrong] * 3
    assert [bool(v.details.get("deduplicated")) for v in verdicts] == [False, True, True, False, True, False]
    for item, verdict in zip(items, verdicts):
        alone = verifier.score(item.completion, item.answer)
        assert (alone.status, alone.reward) == (verdict.status, verdict.reward)
        assert alone.details == {k: v for k, v in verdict.details.items() if k != "deduplicated"}


def test_math_sends_each_pair_and_each_second_opinion_once_per_batch():
    answer = "(x+1)^2"
    completions = ["so \\boxed{x^2+2x+1}", "thus \\boxed{x^2+2x+1}",  # one pair, two completions
                   "so \\boxed{x^2+2x}", "so \\boxed{x^2+2x}", "hence \\boxed{x^2+2x}"]  # one pair, twice one text
    items = [{"id": f"m{i}", "domain": "math", "completion": c, "answer": answer} for i, c in enumerate(completions)]
    config = VerifierConfig.model_validate({"math": {"workers": 1, "second_opinion": 1.0}})
    with VerifierPool(config) as pool:
        before = pool.info()["math"]["requests"]
        verdicts = pool.verify_batch(items)
        requests = pool.info()["math"]["requests"] - before
    # two pairs to sympy, and plain math-verify on the two distinct negative completions (five without the memo)
    assert requests == 2 + 2
    assert [v.status for v in verdicts] == [Status.correct] * 2 + [Status.wrong] * 3
    assert [bool(v.details.get("deduplicated")) for v in verdicts] == [False, True, False, True, True]
    assert [v.details.get("path") for v in verdicts] == ["sympy"] * 5
    for verdict in verdicts:  # the batch API's stamp and second opinion reach the copies too
        assert verdict.details["verifier_version"] and verdict.details["settings_digest"]
    assert [v.details.get("second_opinion") for v in verdicts[2:]] == ["rejects"] * 3
    assert verdicts[1].details == {**verdicts[0].details, "deduplicated": True}


def math500_answers() -> list[str]:
    from scalerl.env.contracts.paths import reference_dir
    from scalerl.verifiers.math.extract import clean_answer

    rows = (reference_dir() / "math500" / "test.jsonl").read_text().splitlines()
    return [clean_answer(json.loads(row)["answer"]) for row in rows]


@pytest.mark.parametrize("every", [pytest.param(1, marks=pytest.mark.slow), 25])
def test_an_answer_written_as_the_reference_is_what_sympy_says_of_it(every):
    from scalerl.verifiers.math.judge import CompareSettings, judge

    settings = CompareSettings()
    assert [answer for answer in math500_answers()[::every]
            if judge(answer, answer, settings).status != "correct"] == []


def test_an_answer_written_as_the_reference_reaches_no_worker():
    items = [{"id": f"s{i}", "domain": "math", "completion": f"so \\boxed{{{answer}}}", "answer": answer}
             for i, answer in enumerate(["52_8", "\\cot x", "x=5", "(-\\infty, 2) \\cup (3, \\infty)"])]
    with VerifierPool(VerifierConfig.model_validate({"math": {"workers": 1}})) as pool:
        before = pool.info()["math"]["requests"]
        verdicts = pool.verify_batch(items)
        assert pool.info()["math"]["requests"] == before
    assert [(v.status, v.details["path"]) for v in verdicts] == [(Status.correct, "fast")] * 4


def test_math_builds_one_fast_path_verdict_per_pair_and_the_batch_api_copies_it():
    items = [{"id": f"f{i}", "domain": "math", "completion": text, "answer": "1/2"}
             for i, text in enumerate(["so \\boxed{0.5}", "thus \\boxed{0.5}", "so \\boxed{0.5}", "\\boxed{3}"])]
    with VerifierPool(VerifierConfig.model_validate({"math": {"workers": 1, "second_opinion": 0}})) as pool:
        inner = pool._verifiers["math"].submit([VerifyItem.model_validate(item) for item in items])()
        verdicts = pool.verify_batch(items)
    assert len({id(v) for v in inner}) == 2  # one verdict per (reference, answer, method): built once
    assert [v.status for v in verdicts] == [Status.correct] * 3 + [Status.wrong]
    assert [v.id for v in verdicts] == ["f0", "f1", "f2", "f3"] and len({id(v) for v in verdicts}) == 4
    assert all(v.details["path"] == "fast" and v.details["verifier_version"] for v in verdicts)


def test_code_an_extraction_that_fails_is_that_items_error_only(monkeypatch):
    from scalerl.verifiers.code import judge

    real = judge.extract_code

    def extract(text, limit, entry_point=None):
        if "BOOM" in text:
            raise RuntimeError("extractor bug")
        return real(text, limit, entry_point)

    monkeypatch.setattr(judge, "extract_code", extract)
    items = [code_item(0, SQUARE), code_item(1, SQUARE + "\n# BOOM"), code_item(2, SQUARE)]
    with CodeVerifier() as verifier:
        verdicts = verifier.verify_many(items)
    assert [v.status for v in verdicts] == [Status.correct, Status.error, Status.correct]
    assert "extractor bug" in verdicts[1].details["error"]
