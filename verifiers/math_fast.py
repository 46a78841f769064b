"""Exact fast path: decide plain-number answers with `fractions.Fraction`, before any sympy work.

Most RL math answers are integers, simple fractions or decimals. When both the reference and the
extracted answer are one of

    integer        42, -7, +3, 007, 1,234,567 (thousands groups of exactly three digits)
    decimal        3.5, -.25, 1,234.5
    fraction       3/4, -3/4, \\frac{3}{4}, \\dfrac{3}{4}, \\tfrac{3}{4}, -\\frac{3}{4}

the verdict is decided here:
    equal as rationals                         -> correct
    different, and neither side is a decimal   -> wrong
    otherwise                                  -> undecided (the sympy path applies math-verify's
                                                  float rounding, e.g. 1/3 vs 0.333333 is correct)

Guarantee: a decided verdict is the verdict the sympy path (math-verify + our guards) gives for the
same pair; `tests/test_math_fastpath.py` checks this over MATH-500 and GSM8K answers.
Numbers with more than `MAX_DIGITS` digits are left to the slow path (it has the hard deadline).
"""

from __future__ import annotations

import re
from fractions import Fraction

MAX_DIGITS = 40
_INT = r"(?:\d+|[1-9]\d{0,2}(?:,\d{3})+)"
_NUMBER = re.compile(rf"^(?P<sign>[+-]?)(?P<int>{_INT})?(?P<dec>\.\d*)?$")
_SLASH = re.compile(rf"^(?P<sign>[+-]?)(?P<num>{_INT})\s*/\s*(?P<den>{_INT})$")
_FRAC = re.compile(r"^(?P<sign>[+-]?)\s*\\[dt]?frac\{\s*(?P<num>\d+)\s*\}\{\s*(?P<den>\d+)\s*\}$")


def parse_simple_number(text: str) -> tuple[Fraction, bool] | None:
    """(value, is_decimal) for a plain number, else None. Never raises."""
    text = text.strip()
    if not text or sum(ch.isdigit() for ch in text) > MAX_DIGITS:
        return None
    match = _NUMBER.match(text)
    if match and (match.group("int") or (match.group("dec") or "").strip(".")):
        digits = (match.group("int") or "0").replace(",", "") + (match.group("dec") or "")
        digits = digits.removesuffix(".")
        value = Fraction(digits)
        return (-value if match.group("sign") == "-" else value), match.group("dec") is not None
    match = _SLASH.match(text) or _FRAC.match(text)
    if match:
        den = int(match.group("den").replace(",", ""))
        if den == 0:
            return None
        value = Fraction(int(match.group("num").replace(",", "")), den)
        return (-value if match.group("sign") == "-" else value), False
    return None


def fast_verdict(gold: str, pred: str) -> bool | None:
    """True/False when decidable exactly (see module docstring), None to defer to the sympy path."""
    g = parse_simple_number(gold)
    if g is None:
        return None
    p = parse_simple_number(pred)
    if p is None:
        return None
    if g[0] == p[0]:
        return True
    if not g[1] and not p[1]:
        return False
    return None
