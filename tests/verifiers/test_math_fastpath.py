"""The exact fast path decides exactly what the sympy path decides (MATH-500, GSM8K, math-verify cases).

For every reference answer the fast path can read, we build predictions: the same value in other
spellings (thousands separators, `a/b` vs `\\frac{a}{b}`, `\\dfrac`, decimals, a leading `+`, spaces),
near misses (+1, x10, +sqrt 2, +pi) and other problems' answers; every pair of math-verify's own case
set whose both sides the fast path reads is added as is. Whenever the fast path decides, `judge`
(math-verify + guard, the worker's slow path) must give the same status. The default run uses a fixed
sample; `slow` runs all of them.
"""

from __future__ import annotations

import json
import random
from fractions import Fraction

import pytest
from scalerl.verifiers.math.fast import fast_verdict, parse_simple_number, read_answer
from scalerl.verifiers.math.judge import judge

from tests.support.reference import REFERENCE

REF = REFERENCE


def all_answers() -> list[str]:
    math500 = [json.loads(x)["answer"] for x in (REF / "math500" / "test.jsonl").read_text().splitlines()]
    gsm = [json.loads(x)["answer"].split("####")[-1].strip()
           for x in (REF / "gsm8k" / "test.jsonl").read_text().splitlines()]
    return math500 + gsm


def case_pairs() -> list[tuple[str, str]]:
    rows = [json.loads(x) for x in (REF / "math_verify_cases" / "math_verify_cases.jsonl").read_text().splitlines()]
    out = [(r["gold"].strip().strip("$"), r["pred"].strip().strip("$")) for r in rows]
    return [(g, p) for g, p in out if read_answer(g) is not None and read_answer(p) is not None]


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


def predictions(gold: str, answers: list[str], rng: random.Random) -> list[str]:
    simple = parse_simple_number(gold)
    if simple is not None:
        value = simple[0]
        preds = spellings(value) + spellings(value + 1) + spellings(value * 10)
    else:
        preds = [gold, gold.replace("\\frac", "\\dfrac"), gold.replace(" ", ""), f"{gold}+1",
                 f"{gold}+\\sqrt{{2}}", f"{gold}-\\pi", f"2\\cdot{gold}" if "," not in gold else gold,
                 gold.replace("1", "2", 1), gold.replace("-", "", 1)]  # near misses inside tuples and matrices
    return preds + rng.sample(answers, 3)


def pairs(rng: random.Random) -> list[tuple[str, str]]:
    answers = all_answers()
    readable = [a for a in answers if read_answer(a) is not None]
    out = [(gold, p) for gold in readable for p in predictions(gold, answers, rng)]
    return out + case_pairs()


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


def test_fast_path_reads_most_reference_answers():
    answers = all_answers()
    assert sum(read_answer(a) is not None for a in answers) > 1750  # of 1,819: all of GSM8K, most of MATH-500


def test_fast_path_matches_slow_path_on_a_sample():
    rng = random.Random(0)
    sample = rng.sample(pairs(rng), 400)
    assert check(sample) > 250


@pytest.mark.slow
def test_fast_path_matches_slow_path_on_all_reference_answers():
    rng = random.Random(1)
    assert check(pairs(rng)) > 15_000


@pytest.mark.parametrize("gold,pred", [
    ("\\frac{1}{3}", "0.333333"),  # math-verify's float rounding decides this one
    ("0.1", "0.1000001"),
    ("x", "X"),  # a lone letter may be a multiple-choice answer
    ("1,22", "1.22"),  # not a thousands grouping: left to math-verify
    ("1" * 41, "1" * 41),  # too many digits for the fast path
    ("137 \\frac{1}{2}", "137.5"),  # a mixed number? left to math-verify
    ("(1,234)", "(1,234)"),  # a pair or one thousand two hundred thirty-four?
    ("1/2\\pi", "\\frac{\\pi}{2}"),  # precedence of an inline slash is ambiguous
    ("\\sqrt{2}", "1.414214"),  # decimals against radicals: math-verify rounds
    ("(2,1)", "(3,1)"),  # empty intervals
    ("50\\%", "50"), ("5\\text{ cm}", "5"), ("\\text{odd}", "odd"),
])
def test_fast_path_defers_what_it_cannot_decide_exactly(gold, pred):
    assert fast_verdict(gold, pred) is None


@pytest.mark.parametrize("gold,pred,expected", [
    ("2,125", "2125", True), ("\\frac{3}{4}", "0.75", True), ("-\\frac{1}{2}", "-1/2", True),
    ("7", "8", False), ("3/4", "\\frac{4}{3}", False), ("1/0", "1", None),
    ("\\frac{\\sqrt{3}}{2}", "\\dfrac{\\sqrt3}{2}", True), ("16\\sqrt{3}", "\\sqrt{768}", True),
    ("18+2\\pi", "2\\pi + 18", True), ("\\frac{\\pi}{3}", "\\frac{2\\pi}{6}", True), ("\\frac14", "1/4", True),
    ("10,\\!080", "10080", True), ("70 \\sqrt{2}", "16", False), ("3\\sqrt{2}", "2\\sqrt{3}", False),
    ("(2,4)", "(2, 4)", True), ("(1,\\frac{1}{2})", "(1, 0.5)", True), ("(2,4)", "(2,5)", False),
    ("(2,4)", "3", False), ("(1,2,3)", "(1,2)", None), ("x+1", "1+x", True), ("2k+2", "2", False),
    ("30^\\circ", "30", True), ("\\$36", "36", True), ("1+2i", "2i+1", True), ("6-5i", "6+5i", False),
    ("\\text{east}", "\\text{east}", True), ("\\text{east}", "7", False), ("(2,\\infty)", "2", False),
    ("1.25", "4", False), ("0.15", "\\frac{5}{13}", False),
    ("\\begin{pmatrix} -2 \\\\ 7 \\end{pmatrix}", "\\begin{pmatrix}-2\\\\7\\end{pmatrix}", True),
    ("\\begin{pmatrix} -2 \\\\ 7 \\end{pmatrix}", "\\begin{pmatrix} -2 \\\\ 8 \\end{pmatrix}", False),
    ("\\begin{pmatrix} -2 \\\\ 7 \\end{pmatrix}", "5", False),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "(1,2)", None),
])
def test_fast_path_examples(gold, pred, expected):
    assert fast_verdict(gold, pred) is expected
