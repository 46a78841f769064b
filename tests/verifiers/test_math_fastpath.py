"""The exact fast path decides exactly what the sympy path decides (over MATH-500 and GSM8K answers).

For every reference answer the fast path can read, we build predictions: the same value in other
spellings (thousands separators, `a/b` vs `\\frac{a}{b}`, decimals, a leading `+`), near misses
(±1, ×10) and other problems' answers; whenever the fast path decides, `judge` (math-verify + guard,
the worker's slow path) must give the same status. The default run uses a fixed sample; `slow` runs all.
"""

from __future__ import annotations

import json
import random
from fractions import Fraction

import pytest

from tests.support.reference import REFERENCE
from verifiers.math import judge
from verifiers.math_fast import fast_verdict, parse_simple_number

REF = REFERENCE


def reference_answers() -> list[str]:
    math500 = [json.loads(x)["answer"] for x in (REF / "math500" / "test.jsonl").read_text().splitlines()]
    gsm = [json.loads(x)["answer"].split("####")[-1].strip()
           for x in (REF / "gsm8k" / "test.jsonl").read_text().splitlines()]
    return [a for a in math500 + gsm if parse_simple_number(a) is not None]


def spellings(value: Fraction) -> list[str]:
    out = []
    if value.denominator == 1:
        n = value.numerator
        out += [str(n), f"{n:,}", f"+{n}" if n >= 0 else str(n), f"{n}.0", f"{n}.00"]
    else:
        p, q = value.numerator, value.denominator
        sign = "-" if p < 0 else ""
        out += [f"{p}/{q}", f"{sign}\\frac{{{abs(p)}}}{{{q}}}", f"{sign}\\dfrac{{{abs(p)}}}{{{q}}}",
                f"{2 * p}/{2 * q}"]
        if 10**6 % q == 0:
            out.append(str(float(value)))
    return out


def pairs(answers: list[str], rng: random.Random) -> list[tuple[str, str]]:
    out = []
    for gold in answers:
        value = parse_simple_number(gold)[0]
        preds = spellings(value) + spellings(value + 1) + spellings(value * 10)
        preds += rng.sample(answers, 3)
        out += [(gold, p) for p in preds]
    return out


def check(pairs_: list[tuple[str, str]]) -> int:
    decided = 0
    mismatches = []
    for gold, pred in pairs_:
        fast = fast_verdict(gold, pred)
        if fast is None:
            continue
        decided += 1
        slow = judge(gold, pred).status
        if slow != ("correct" if fast else "wrong"):
            mismatches.append((gold, pred, fast, slow))
    assert mismatches == []
    return decided


def test_fast_path_matches_slow_path_on_a_sample():
    rng = random.Random(0)
    answers = reference_answers()
    assert len(answers) > 1000  # MATH-500's plain numbers plus all of GSM8K
    sample = rng.sample(pairs(answers, rng), 300)
    assert check(sample) > 200


@pytest.mark.slow
def test_fast_path_matches_slow_path_on_all_reference_answers():
    rng = random.Random(1)
    assert check(pairs(reference_answers(), rng)) > 10_000


@pytest.mark.parametrize("gold,pred", [
    ("\\frac{1}{3}", "0.333333"),  # math-verify's float rounding decides this one
    ("0.1", "0.1000001"),
    ("x+1", "1+x"),
    ("1,22", "1.22"),  # not a thousands grouping: left to math-verify
    ("1" * 41, "1" * 41),  # too many digits for the fast path
])
def test_fast_path_defers_what_it_cannot_decide_exactly(gold, pred):
    assert fast_verdict(gold, pred) is None


@pytest.mark.parametrize("gold,pred,expected", [
    ("2,125", "2125", True), ("\\frac{3}{4}", "0.75", True), ("-\\frac{1}{2}", "-1/2", True),
    ("7", "8", False), ("3/4", "\\frac{4}{3}", False), ("1/0", "1", None),
])
def test_fast_path_examples(gold, pred, expected):
    assert fast_verdict(gold, pred) is expected
