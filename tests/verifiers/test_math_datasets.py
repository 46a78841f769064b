"""Reference data through the real batch API (persistent workers, fast path, dedupe).

MATH-500: each reference solution against its own answer is `correct` (500/500, as math-verify 0.9.0
itself labels them); against another problem's answer it is `wrong` (a fixed sample). GSM8K: reference
answers with thousands separators match the same number written with or without them.
"""

from __future__ import annotations

import json
import random

import pytest
from scalerl.verifiers import VerifierPool
from scalerl.verifiers.math.extract import clean_answer

from tests.support.reference import REFERENCE

REF = REFERENCE
MATH500 = [json.loads(x) for x in (REF / "math500" / "test.jsonl").read_text().splitlines()]
GSM8K = [json.loads(x) for x in (REF / "gsm8k" / "test.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def pool():
    with VerifierPool() as p:
        yield p


def item(i, completion, answer):
    return {"id": str(i), "domain": "math", "completion": completion, "answer": answer}


def test_math500_reference_solutions_are_correct(pool):
    verdicts = pool.verify_batch([item(r["unique_id"], r["solution"], r["answer"]) for r in MATH500])
    wrong = [(v.id, v.status.value, v.details) for v in verdicts if v.status.value != "correct"]
    assert wrong == []
    assert [v.id for v in verdicts] == [r["unique_id"] for r in MATH500]


def test_math500_solutions_against_another_answer_are_wrong(pool):
    rng = random.Random(0)
    rows = rng.sample(MATH500, 120)
    items = []
    for a, b in zip(rows[:60], rows[60:]):
        if clean_answer(a["answer"]) != clean_answer(b["answer"]):
            items.append(item(a["unique_id"], a["solution"], b["answer"]))
    verdicts = pool.verify_batch(items)
    assert len(items) >= 55
    assert [(v.id, v.status.value) for v in verdicts if v.status.value != "wrong"] == []


def test_gsm8k_thousands_separators(pool):
    rows = [r for r in GSM8K if "," in r["answer"].split("####")[-1]]
    assert len(rows) >= 10
    items = []
    for r in rows:
        gold = r["answer"].split("####")[-1].strip()
        plain = gold.replace(",", "")
        items += [item(f"{r['idx']}-plain", f"so \\boxed{{{plain}}}", gold),
                  item(f"{r['idx']}-gsm", r["answer"], plain),
                  item(f"{r['idx']}-latex", "$\\boxed{" + f"{int(plain):,}".replace(",", "{,}") + "}$", gold),
                  item(f"{r['idx']}-off", f"so \\boxed{{{int(plain) + 1}}}", gold)]
    verdicts = {v.id: v.status.value for v in pool.verify_batch(items)}
    assert {k: v for k, v in verdicts.items() if v != ("wrong" if k.endswith("-off") else "correct")} == {}
