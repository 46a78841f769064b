"""Acceptance rules on parsed answers (sympy objects), tried after math-verify said "not equal".

    rounded    the reference is a plain decimal with d decimals and the answer is exact (or has more
               decimals): equal when they are within half a unit of the reference's last decimal
               (`1587/52` vs `30.52`, `\\frac13` vs `0.33`); never the other way round
    equation   an equation against an expression solved for the one variable the expression lacks,
               linear in it (`xy = 6` vs `6/x`); two equations that are constant multiples
               (`y = 2x + 3` vs `2x - y + 3 = 0`); a function definition whose argument is renamed
               (`f(x) = x^2` vs `f(t) = t^2`)

Guarantees: every rule only *accepts* (returns a rule name) on an exact sympy identity or a stated
precision; anything sympy cannot settle returns None (the verdict stays math-verify's `wrong`). Runs
inside a worker under its soft timer. Not guaranteed: that the question allowed the other form.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from sympy import Eq, Expr, Float, N, Poly, Symbol, simplify
from sympy.core.function import AppliedUndef

_DECIMAL = re.compile(r"^\s*-?\d*\.(\d+)\s*$")


def accept(gold: str, gold_parsed: tuple, pred: str, pred_parsed: tuple) -> str | None:
    """The rule that makes `pred` equal to `gold`, or None."""
    g, p = gold_parsed[0], pred_parsed[0]
    try:
        if _rounded(gold, g, pred, p):
            return "rounded"
        if _equation(g, p) or _equation(p, g) or _equations(g, p) or _renamed(g, p):
            return "equation"
    except Exception:  # sympy raises many types on exotic input; no identity shown -> no rule
        return None
    return None


def _rounded(gold: str, g, pred: str, p) -> bool:
    match = _DECIMAL.match(gold)
    if match is None or not isinstance(p, Expr) or p.free_symbols or not p.is_number:
        return False
    places = len(match.group(1))
    pred_match = _DECIMAL.match(pred)
    if pred_match is not None and len(pred_match.group(1)) <= places:
        return False  # an answer rounded as coarsely as the reference: math-verify's comparison stands
    if p.has(Float) and pred_match is None:
        return False
    try:
        reference = Decimal(gold.strip())
    except InvalidOperation:
        return False
    value = N(p, 30)
    if not value.is_real:
        return False
    return abs(Decimal(str(value)) - reference) <= Decimal(5) / Decimal(10) ** (places + 1)


def _equation(eq, expr) -> bool:
    """`eq` is an equation, `expr` an expression; `eq` solved for its one extra symbol gives `expr`."""
    if not isinstance(eq, Eq) or not isinstance(expr, Expr) or isinstance(expr, Eq):
        return False
    extra = eq.free_symbols - expr.free_symbols
    if len(extra) != 1 or not expr.free_symbols:
        return False
    (s,) = extra
    residual = eq.lhs - eq.rhs
    if Poly(residual, s).degree() != 1:
        return False  # y^2 = x has two solutions: not "the" expression
    return simplify(residual.subs(s, expr)) == 0


def _equations(a, b) -> bool:
    if not (isinstance(a, Eq) and isinstance(b, Eq)) or not a.free_symbols or a.free_symbols != b.free_symbols:
        return False
    ra, rb = a.lhs - a.rhs, b.lhs - b.rhs
    if rb == 0:
        return False
    ratio = simplify(ra / rb)
    return bool(ratio.is_number and ratio != 0 and not ratio.free_symbols)


def _renamed(a, b) -> bool:
    if not (isinstance(a, Eq) and isinstance(b, Eq)):
        return False
    fa, fb = a.lhs, b.lhs
    if not (isinstance(fa, AppliedUndef) and isinstance(fb, AppliedUndef)) or fa.func != fb.func:
        return False
    if len(fa.args) != len(fb.args) or not all(isinstance(x, Symbol) for x in fa.args + fb.args):
        return False
    renamed = b.rhs.xreplace(dict(zip(fb.args, fa.args)))
    return simplify(a.rhs - renamed) == 0
