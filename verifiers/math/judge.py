"""Math equivalence: math-verify 0.9.0 + sympy, with guards against its known false positives.

`judge(gold, pred, settings)` is what a worker process runs for one (reference answer, extracted
answer) pair; the parent has already extracted the answer (`scalerl.verifiers.math.extract`) and tried the exact
fast path (`scalerl.verifiers.math.fast`). Both strings are parsed as `$\\boxed{...}$` with math-verify's
default targets (LaTeX, then plain expressions) and compared with `math_verify.verify`.

Outcomes: `correct` / `wrong`; `unparsable` when the answer yields nothing math-verify can compare
or exhausts memory/recursion; `error` when the *reference* answer cannot be parsed (a data problem,
not the model's). Never raises on model text.

Departures from plain math-verify (documented policy, see docs/math.md):
* numeric false-positive guard: math-verify compares Float-free numbers with
  `(a - b).evalf(chop=True) == 0`, which calls any two tiny numbers equal (`1/2^{99}` vs `1/2^{98}`,
  `\\frac{1}{2004!}` vs `\\frac{1}{2006!}`) and has a few pinned quirks (`1 - 1/e` vs `1 + 1/e`). When
  math-verify says equal, both sides are closed numeric expressions without floats or percent
  signs, and their 30-digit values differ relatively by more than 1e-12, the verdict is `wrong`.
  Floats keep math-verify's rounding policy (`float_rounding` decimals: 1/3 == 0.333333).
* answer shapes (`math.shape_rules`): multiple choice, multi-part answers, inequalities against
  intervals, degrees, units and word answers are decided by `scalerl.verifiers.math.rules` before math-verify;
  rounded references and equations against expressions are accepted by `scalerl.verifiers.math.forms` after it.
  `Judgement.rule` names what decided.
* spellings (`math.shape_rules`): both sides go through `scalerl.verifiers.math.normalize` first
  (Unicode math, `\\frac12`, ordinals, degree signs, column vectors, set-builder, `\\pm` in lists).
* numeric fallback: when sympy runs out of time (the worker's soft timer) on two closed-form,
  float-free constants, `numeric_fallback` compares them at NUMERIC_DIGITS (rule `numeric`).
* timeouts: math-verify's `signal.alarm` is disabled (`timeout_seconds=None`); the worker arms its own
  soft timer and the parent process enforces the hard per-item deadline by killing the worker.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
from scalerl.verifiers.math.forms import accept
from scalerl.verifiers.math.normalize import normalize
from scalerl.verifiers.math.rules import decide
from sympy import Expr, Float, N, UnevaluatedExpr, nan, oo, zoo

GUARD_DIGITS = 30
GUARD_RELATIVE_TOL = 1e-12
NUMERIC_DIGITS = 50  # the numeric fallback's precision (mpmath through sympy's evalf)


@dataclass(frozen=True)
class CompareSettings:
    """math-verify's comparison knobs plus our guard switch (mirrors `MathConfig`)."""

    float_rounding: int = 6
    numeric_precision: int = 15
    strict: bool = True
    allow_set_relation_comp: bool = False
    guard_false_positives: bool = True
    shape_rules: bool = True


@dataclass(frozen=True)
class Judgement:
    status: str  # a verifiers Status value
    reason: str = ""
    rule: str = ""  # what decided: math_verify, or a rule of rules.py / forms.py


DEFAULT_TARGETS = (LatexExtractionConfig(), ExprExtractionConfig())


def targets_for(match_types: Sequence[str]) -> tuple:
    """math-verify extraction targets as its own tests build them (`boxed_match_priority=0`)."""
    return tuple(
        LatexExtractionConfig(boxed_match_priority=0) if m == "latex" else ExprExtractionConfig()
        for m in match_types
    )


def parse_text(text: str, targets: Sequence = DEFAULT_TARGETS) -> list:
    return parse(text, list(targets), parsing_timeout=None)


@functools.lru_cache(maxsize=4096)
def parse_answer(answer: str) -> tuple:
    """An extracted answer (or a reference answer) parsed as `$\\boxed{answer}$`; cached per process
    because RL groups score many samples against one reference."""
    return tuple(parse_text(f"$\\boxed{{{answer}}}$"))


def judge(gold: str, pred: str, settings: CompareSettings = CompareSettings()) -> Judgement:
    """Verdict status for reference answer `gold` against extracted answer `pred`."""
    if settings.shape_rules:
        gold, pred = normalize(gold), normalize(pred)
    try:
        gold_parsed = parse_answer(gold)
    except (RecursionError, MemoryError) as exc:
        return Judgement("error", f"reference answer exhausted {type(exc).__name__}")
    if not gold_parsed:
        return Judgement("error", "reference answer could not be parsed")
    try:
        if settings.shape_rules:
            shaped = decide(gold, pred, functools.partial(_equal_texts, settings=settings))
            if shaped is not None:
                return Judgement("correct" if shaped[0] else "wrong", rule=shaped[1])
        pred_parsed = parse_answer(pred)
        if not pred_parsed:
            return Judgement("unparsable", "math-verify found no expression in the answer")
        if equivalent(list(gold_parsed), list(pred_parsed), settings):
            return Judgement("correct", rule="math_verify")
        rule = accept(gold, gold_parsed, pred, pred_parsed) if settings.shape_rules else None
    except (RecursionError, MemoryError) as exc:
        return Judgement("unparsable", f"answer exhausted {type(exc).__name__}")
    return Judgement("correct", rule=rule) if rule else Judgement("wrong", rule="math_verify")


def _equal_texts(gold: str, pred: str, settings: CompareSettings) -> bool:
    """Two answer strings equal under math-verify and the guard (the comparison rules' parts use it)."""
    g, p = parse_answer(gold), parse_answer(pred)
    return bool(g and p) and equivalent(list(g), list(p), settings)


def equivalent(gold: list, pred: list, settings: CompareSettings = CompareSettings()) -> bool:
    """`math_verify.verify(gold, pred)` pair by pair, with the false-positive guard on each pair."""
    for g, p in product(gold, pred):
        if not verify(
            g, p, float_rounding=settings.float_rounding, numeric_precision=settings.numeric_precision,
            strict=settings.strict, allow_set_relation_comp=settings.allow_set_relation_comp,
            timeout_seconds=None,
        ):
            continue
        if settings.guard_false_positives and numbers_differ(g, p):
            continue
        return True
    return False


def compare_texts(gold: str, pred: str, match_types: Sequence[str] = ("latex", "expr"),
                  settings: CompareSettings = CompareSettings()) -> bool:
    """Full-text comparison as math-verify's own tests do it (used to replay its cases)."""
    targets = targets_for(match_types)
    return equivalent(parse_text(gold, targets), parse_text(pred, targets), settings)


def numeric_fallback(gold: str, pred: str, settings: CompareSettings = CompareSettings()) -> bool:
    """True when both answers are closed-form constants equal at NUMERIC_DIGITS: the worker's verdict
    after sympy ran out of time on the pair (the parses are cached by then)."""
    if not settings.shape_rules:
        return False
    g, p = parse_answer(normalize(gold)), parse_answer(normalize(pred))
    return bool(g and p) and closed_values_agree(g[0], p[0])


def closed_values_agree(a: Any, b: Any) -> bool:
    """Both sides closed, float-free numeric expressions whose NUMERIC_DIGITS-digit values agree
    within GUARD_RELATIVE_TOL (both zero counts as agreeing); False whenever that is not shown."""
    if not (isinstance(a, Expr) and isinstance(b, Expr)) or a.free_symbols or b.free_symbols:
        return False
    if a.has(Float, UnevaluatedExpr) or b.has(Float, UnevaluatedExpr):
        return False  # floats keep math-verify's rounding policy
    try:
        va, vb = N(a, NUMERIC_DIGITS), N(b, NUMERIC_DIGITS)
        if not (va.is_number and vb.is_number) or any(v.has(nan, zoo, oo, -oo) for v in (va, vb)):
            return False
        scale = max(abs(va), abs(vb))
        return bool(abs(va - vb) <= scale * GUARD_RELATIVE_TOL)
    except Exception:  # sympy raises many types on exotic input; no evidence -> no verdict
        return False


def numbers_differ(a: Any, b: Any) -> bool:
    """True when `a` and `b` are closed, float-free numeric expressions whose values differ."""
    if not (isinstance(a, Expr) and isinstance(b, Expr)):
        return False
    if a.free_symbols or b.free_symbols:
        return False
    if a.has(Float, UnevaluatedExpr) or b.has(Float, UnevaluatedExpr):
        return False
    try:
        va, vb = N(a, GUARD_DIGITS), N(b, GUARD_DIGITS)
        if not (va.is_number and vb.is_number) or any(v.has(nan, zoo, oo, -oo) for v in (va, vb)):
            return False
        scale = max(abs(va), abs(vb))
        return bool(scale != 0 and abs(va - vb) > scale * GUARD_RELATIVE_TOL)
    except Exception:  # sympy raises many types on exotic input; no evidence -> keep math-verify's verdict
        return False
