"""The last false-negative classes of the math verifier, both ways, through `verify_batch` with boxed
answers: every equivalent spelling is accepted, the nearest wrong form rejected; plus the numeric
fallback for closed-form constants when sympy runs out of time (verifiers/math/normalize.py,
verifiers/math/rules.py `ordering`, verifiers/math/judge.py `numeric_fallback`, the worker)."""

from __future__ import annotations

import signal

import pytest
from scalerl.verifiers import VerifierPool
from scalerl.verifiers.math.judge import CompareSettings, judge, numeric_fallback
from scalerl.verifiers.math.normalize import normalize
from scalerl.verifiers.math.worker import _after_soft_timeout, _on_alarm
from scalerl.verifiers.verifier_config import MathConfig, VerifierConfig

# (class, reference, equivalent answer, nearest wrong answer)
CLASSES = [
    ("unicode", "(-\\infty,-3)\\cup(3,\\infty)", "(−∞, −3) ∪ (3, +∞)", "(−∞, −3) ∪ (4, +∞)"),
    ("unicode", "x \\le 5", "x ≤ 5", "x < 5"),
    ("unicode", "2\\sqrt{3}", "2√3", "3√2"),
    ("unicode", "\\sqrt{x+1}", "√(x+1)", "√(x−1)"),
    ("unicode", "-5", "−5", "5"),
    ("unicode", "6", "2 × 3", "2 × 4"),
    ("unicode", "2", "6 ÷ 3", "6 ÷ 2"),
    ("unicode", "2\\pi", "2π", "3π"),
    ("unicode", "x^2+1", "x² + 1", "x³ + 1"),
    ("set_builder", "(-1,1)", "\\{x \\mid -1 < x < 1\\}", "\\{x \\mid -1 \\le x < 1\\}"),
    ("set_builder", "(-1,1)", "{x | −1 < x < 1}", "{x | −1 < x < 2}"),
    ("set_builder", "[0,\\infty)", "\\{x : x \\ge 0\\}", "\\{x : x > 0\\}"),
    ("plus_minus", "\\{2,-2\\}", "\\{\\pm 2\\}", "\\{\\pm 3\\}"),
    ("plus_minus", "-2, 2", "\\pm 2", "2"),
    ("plus_minus", "\\{1+\\sqrt2, 1-\\sqrt2\\}", "\\{1 \\pm \\sqrt{2}\\}", "\\{1 \\pm \\sqrt{3}\\}"),
    ("plus_minus", "\\pm 2", "2, -2", "2, 2"),
    ("column_vector", "(1,2)", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix} 2 \\\\ 1 \\end{pmatrix}"),
    ("column_vector", "\\begin{pmatrix} 3 \\\\ -1 \\\\ 2 \\end{pmatrix}", "(3, -1, 2)", "(3, 1, 2)"),
    ("ordinal_unit", "12", "12^{\\mathrm{th}}", "13^{\\mathrm{th}}"),
    ("ordinal_unit", "15", "15th day", "16th day"),
    ("ordinal_unit", "3", "3^{\\text{rd}}", "2^{\\text{nd}}"),
    ("ordinal_unit", "5", "5\\text{ cm}", "6\\text{ cm}"),
    ("labelled", "1, 3", "Minimum: 1, Maximum: 3", "Minimum: 1, Maximum: 4"),
    ("labelled", "1,3", "\\text{Minimum: } 1, \\text{Maximum: } 3", "\\text{Minimum: } 3"),
    ("frac_braces", "\\frac{1+a}{c}", "\\frac{1+a}c", "\\frac{1-a}c"),
    ("frac_braces", "\\frac{1}{2}", "\\frac12", "\\frac13"),
    ("frac_braces", "\\frac{x}{2}", "\\dfrac x2", "\\dfrac x3"),
    ("degrees", "30^\\circ", "30°", "60°"),
    ("degrees", "30^\\circ", "30\\degree", "30\\degree + 1"),
    ("degrees", "30^\\circ", "30 degrees", "45 degrees"),
    ("degrees", "30", "30^{\\circ}", "31^{\\circ}"),
    ("infinity", "\\infty", "\\text{infinitely many}", "\\text{finitely many}"),
    ("infinity", "\\infty", "infinitely many solutions", "0"),
    ("infinity", "\\text{infinitely many}", "\\infty", "1"),
    ("ordering", "a, b, c", "a < b < c", "b < a < c"),
    ("ordering", "\\sqrt{2}, \\frac{3}{2}, 2", "\\sqrt2 < \\frac32 < 2", "\\frac32 < \\sqrt2 < 2"),
    ("ordering", "x < y < z", "x, y, z", "z, y, x"),
    ("trig_degrees", "\\frac{\\sqrt{3}}{8}", "\\sin 20^\\circ \\sin 40^\\circ \\sin 80^\\circ",
     "\\sin 20^\\circ \\sin 40^\\circ \\sin 70^\\circ"),
    ("trig_degrees", "\\frac{1}{2}", "\\cos(60^\\circ)", "\\cos(30^\\circ)"),
]


@pytest.fixture(scope="module")
def pool():
    with VerifierPool(VerifierConfig(math=MathConfig(workers=1))) as running:
        yield running


def _items(pairs):
    return [{"id": str(i), "domain": "math", "completion": f"So the answer is $\\boxed{{{pred}}}$.", "answer": gold}
            for i, (gold, pred) in enumerate(pairs)]


def test_every_class_is_accepted_and_its_nearest_wrong_form_rejected(pool):
    right = pool.verify_batch(_items([(g, ok) for _, g, ok, _ in CLASSES]))
    wrong = pool.verify_batch(_items([(g, bad) for _, g, _, bad in CLASSES]))
    for (name, gold, ok, bad), v_ok, v_bad in zip(CLASSES, right, wrong):
        assert v_ok.status == "correct", (name, gold, ok, v_ok.details)
        assert v_bad.status == "wrong", (name, gold, bad, v_bad.details)


@pytest.mark.parametrize("name,gold,ok,bad", [c for c in CLASSES if c[0] in ("ordering", "plus_minus")])
def test_list_classes_are_decided_by_their_rule(name, gold, ok, bad):
    expected = "ordering" if name == "ordering" else "parts"
    assert (judge(gold, ok).status, judge(gold, ok).rule) == ("correct", expected)
    assert judge(gold, bad).status == "wrong"


def test_rewrites_leave_plain_answers_and_other_shapes_alone():
    for text in ("42", "1,234", "\\frac{3}{4}", "(1, 2)", "x^2+1", "\\begin{pmatrix} 1 & 2 \\end{pmatrix}",
                 "(\\pm 2, 0)", "\\text{Evelyn}", "30^\\circ"):
        assert normalize(text) == text


def test_plus_minus_against_one_sign_is_wrong():
    assert (judge("\\pm 2", "2").status, judge("2", "\\pm 2").status) == ("wrong", "wrong")


def test_shape_rules_off_keeps_plain_math_verify():
    assert judge("12", "12^{\\mathrm{th}}", CompareSettings(shape_rules=False)).status == "wrong"
    assert judge("1, 3", "Minimum: 1, Maximum: 3", CompareSettings(shape_rules=False)).status == "wrong"


def test_numeric_fallback_decides_closed_constants_only():
    assert numeric_fallback("\\frac{\\sqrt{3}}{8}", "\\sin 20^\\circ \\sin 40^\\circ \\sin 80^\\circ")
    assert not numeric_fallback("\\frac{\\sqrt{3}}{8}", "\\sin 20^\\circ \\sin 40^\\circ \\sin 70^\\circ")
    assert not numeric_fallback("\\frac{1}{2^{99}}", "\\frac{1}{2^{98}}")  # tiny numbers stay apart
    assert not numeric_fallback("\\pi", "3.14159265358979323846")  # floats keep math-verify's rounding
    assert not numeric_fallback("x + 1", "1 + x")  # free symbols: symbolic only


@pytest.fixture
def worker_alarm():
    previous = signal.signal(signal.SIGALRM, _on_alarm)  # as the worker process installs it
    yield
    signal.signal(signal.SIGALRM, previous)


def test_worker_after_soft_timeout_answers_numeric_or_timeout(worker_alarm):
    settings, cosines = CompareSettings(), "\\cos 20^\\circ \\cos 40^\\circ \\cos 60^\\circ"
    equal = _after_soft_timeout(settings, "\\frac{1}{16}", cosines + " \\cos 80^\\circ", 2.0)
    assert (equal["status"], equal["rule"]) == ("correct", "numeric")
    assert _after_soft_timeout(settings, "\\frac{1}{8}", cosines, 2.0)["status"] == "timeout"
    assert _after_soft_timeout(settings, "x", "x + 0", 2.0)["status"] == "timeout"

