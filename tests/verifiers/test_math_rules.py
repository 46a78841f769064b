"""Answer-shape rules (verifiers/math/rules.py, verifiers/math/forms.py) through `judge`, both ways:
equivalent forms are accepted, the nearest wrong forms rejected, and the rule that decided is named."""

from __future__ import annotations

import pytest
from scalerl.verifiers.math.judge import CompareSettings, judge

ACCEPT = [  # (reference, answer, rule)
    ("16,3,1,1", "w=16, d=3, a=1, b=1", "parts"), ("a=2, b=-3", "b=-3, a=2", "parts"),
    ("2, -3", "x=2 \\text{ or } x=-3", "parts"), ("1,-2", "x = -2, x = 1", "parts"),
    ("(12,7,8)", "12, 7, 8", "parts"), ("\\{1,2,3\\}", "3, 2, 1", "parts"),
    ("12 \\text{ red}, 7 \\text{ blue}", "12, 7", "parts"),
    ("B", "(B) 2\\sqrt{2}", "choice"), ("(B) 2\\sqrt{2}", "2\\sqrt{2}", "choice"),
    ("\\text{(E)}", "\\textbf{(E)}", "choice"),
    ("(-\\infty,-5)", "k < -5", "interval"), ("[-2,3)", "-2 \\le x < 3", "interval"),
    ("(-\\infty,-1)\\cup(2,\\infty)", "x<-1 \\text{ or } x>2", "interval"), ("x > 4", "(4, \\infty)", "interval"),
    ("30^\\circ", "\\frac{\\pi}{6}", "degrees"), ("\\frac{\\pi}{2}", "90^\\circ", "degrees"),
    ("12", "12 \\text{ cm}", "units"), ("\\text{stopped}", "The car stopped", "text"),
    ("\\text{Evelyn}", "Evelyn", "text"),
    ("30.52", "\\frac{1587}{52}", "rounded"), ("1.41", "\\sqrt{2}", "rounded"), ("3.142", "\\pi", "rounded"),
    ("\\frac{6}{x}", "xy = 6", "equation"), ("f(x)=x", "f(z)=z", "equation"),
    ("f(x)=x^2+1", "f(t) = t^2 + 1", "equation"),
]
REJECT = [  # the nearest wrong form of each accepted one
    ("16,3,1,1", "w=16, d=3, a=2, b=1"), ("a=2, b=-3", "a=-3, b=2"), ("2, -3", "x=2"), ("1,-2", "x=-1, x=2"),
    ("(12,7,8)", "12, 5, 9"), ("\\{1,2,3\\}", "3, 2"), ("12 \\text{ red}, 7 \\text{ blue}", "12"),
    ("3, 5, 7", "3"), ("B", "(C) 2\\sqrt{2}"), ("(B) 2\\sqrt{2}", "4"), ("\\text{(E)}", "\\textbf{(D)}"),
    ("(-\\infty,-5)", "k \\le -5"), ("[-2,3)", "-2 < x < 3"),
    ("(-\\infty,-1)\\cup(2,\\infty)", "x<-1 \\text{ or } x>3"),
    ("x > 4", "[4, \\infty)"), ("30^\\circ", "\\frac{\\pi}{3}"), ("\\frac{\\pi}{2}", "45^\\circ"),
    ("12", "13 \\text{ cm}"), ("\\text{stopped}", "It never stopped"), ("\\text{Evelyn}", "\\text{Angela}"),
    ("30.52", "\\frac{1577}{52}"), ("1.41", "\\sqrt{3}"), ("3.142", "3.1"), ("0.33", "0.3"),
    ("\\frac{6}{x}", "xy = 3"), ("f(x)=x", "f(z)=2z"), ("f(x)=x^2+1", "f(t) = t^2 - 1"),
]


@pytest.mark.parametrize("gold,pred,rule", ACCEPT)
def test_equivalent_forms_are_accepted_by_their_rule(gold, pred, rule):
    verdict = judge(gold, pred)
    assert (verdict.status, verdict.rule) == ("correct", rule)


@pytest.mark.parametrize("gold,pred", REJECT)
def test_nearest_wrong_forms_are_rejected(gold, pred):
    assert judge(gold, pred).status == "wrong"


def test_first_part_right_is_not_enough_and_plain_math_verify_says_otherwise():
    gold, pred = "12 \\text{ red}, 7 \\text{ blue}", "12"
    assert judge(gold, pred, CompareSettings(shape_rules=False)).status == "correct"  # the false positive
    assert (judge(gold, pred).status, judge(gold, pred).rule) == ("wrong", "parts")


def test_plain_pairs_are_decided_by_math_verify_and_named():
    assert (judge("\\frac12", "0.5").status, judge("\\frac12", "0.5").rule) == ("correct", "math_verify")
    assert (judge("1,234", "1234").rule, judge("1,234", "1233").status) == ("math_verify", "wrong")
