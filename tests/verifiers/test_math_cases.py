"""Agreement with math-verify 0.9.0's own regression cases, and the false positives we catch.

Rows without `reviewer_note` must agree with upstream. Rows with `reviewer_note` follow the policy in
docs/math.md ("flagged math-verify rows"): we keep math-verify's verdict on all 14 (FLAGGED_POLICY),
because our comparator *is* math-verify and none of them is a numeric false positive our guard targets.
"""

from __future__ import annotations

import json

import pytest
from math_verify import parse, verify
from scalerl.verifiers.math.judge import CompareSettings, compare_texts, equivalent, judge

from tests.support.reference import REFERENCE

CASES = REFERENCE / "math_verify_cases" / "math_verify_cases.jsonl"
ROWS = [json.loads(line) for line in CASES.read_text().splitlines()] if CASES.exists() else []
FLAGGED_POLICY = {r["id"]: r["expected"] for r in ROWS if "reviewer_note" in r}


def our_verdict(row: dict) -> bool:
    s = row["settings"]
    if row["harness"] != "compare_strings":
        return equivalent(parse(row["gold"]), parse(row["pred"]))
    settings = CompareSettings(float_rounding=s["precision"], strict=s["strict"],
                               allow_set_relation_comp=s["allow_set_relation_comp"])
    return compare_texts(row["gold"], row["pred"], s["match_types"], settings)


def test_reference_cases_present():
    assert len(ROWS) == 275, f"expected 275 rows in {CASES}"
    assert len(FLAGGED_POLICY) == 14


def test_unflagged_rows_agree_with_upstream():
    disagree = [r["id"] for r in ROWS if "reviewer_note" not in r and our_verdict(r) != r["expected"]]
    assert disagree == []


def test_flagged_rows_follow_documented_policy():
    rows = [r for r in ROWS if r["id"] in FLAGGED_POLICY]
    disagree = [r["id"] for r in rows if our_verdict(r) != FLAGGED_POLICY[r["id"]]]
    assert disagree == []


FALSE_POSITIVES = [
    ("\\frac{1}{2^{98}}", "\\frac{1}{2^{99}}"),
    ("1/2^{98}", "1/2^{99}"),
    ("\\frac{1}{2004!}", "\\frac{1}{2006!}"),
    ("10^{-20}", "10^{-21}"),
    ("2^{-100}", "3 \\cdot 2^{-100}"),
]


@pytest.mark.parametrize("gold,pred", FALSE_POSITIVES)
def test_known_false_positives_are_wrong(gold, pred):
    assert verify(parse(f"${gold}$"), parse(f"${pred}$")), "math-verify 0.9.0 no longer has this false positive"
    assert judge(gold, pred).status == "wrong"


@pytest.mark.parametrize("gold,pred", [
    ("\\frac{1}{2^{99}}", "2^{-99}"),
    ("2\\sqrt{2}", "\\sqrt{8}"),
    ("\\frac{1}{3}", "0.333333"),
    ("\\frac{\\pi}{2}", "\\pi/2"),
    ("\\frac{1}{2004!}", "\\frac{1}{2004 \\cdot 2003!}"),
    ("28\\%", "28"),
])
def test_guard_keeps_true_equalities(gold, pred):
    assert judge(gold, pred).status == "correct"


def test_guard_can_be_switched_off():
    off = CompareSettings(guard_false_positives=False)
    assert judge("\\frac{1}{2^{98}}", "\\frac{1}{2^{99}}", off).status == "correct"
