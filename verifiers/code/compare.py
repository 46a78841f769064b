"""Output comparators (stdio) and result equality (functional), run in the parent, never the sandbox.

stdio `compare` values (`StdioTests.compare` in `scalerl.env.contracts.records`):
- `tokens` (default): whitespace-split, case-sensitive; where the *expected* token is a float literal
  (has '.', 'e' or 'E', or is inf/nan), the output token matches within 1e-6 absolute or relative;
  integer and text tokens must match exactly.
- `exact`: byte-for-byte equal text.
- `lines`: equal line by line after stripping trailing whitespace on each line and trailing empty lines.
- `float:<tol>`: like `tokens`, but every token that parses as a number on both sides matches within
  `tol` (absolute or relative).

Functional equality works on canonical forms (`scalerl.verifiers.code.sandbox._canon`): JSON cannot tell a list from
a tuple, so list/tuple/deque are interchangeable; floats match within 1e-6; and, as in the APPS/TACO
harness, an expected single-element list also matches its element.
"""

from __future__ import annotations

import math

DEFAULT_TOL = 1e-6


def _is_float_literal(tok: str) -> bool:
    low = tok.lower()
    if not any(c in low for c in ".e") and low.lstrip("+-") not in ("inf", "infinity", "nan"):
        return False
    try:
        float(tok)
        return True
    except ValueError:
        return False


def _num_close(got: str, exp: str, tol: float) -> bool:
    try:
        g, e = float(got), float(exp)
    except ValueError:
        return False
    return math.isclose(g, e, rel_tol=tol, abs_tol=tol) or (math.isnan(g) and math.isnan(e))


def compare_output(got: str, expected: str, compare: str = "tokens") -> bool:
    """True when program output `got` matches `expected` under `compare`."""
    if compare == "exact":
        return got == expected
    if compare == "lines":
        norm = (lambda s: [ln.rstrip() for ln in s.rstrip().split("\n")])
        return norm(got) == norm(expected)
    any_number = compare.startswith("float:")
    tol = float(compare.split(":", 1)[1]) if any_number else DEFAULT_TOL
    g_toks, e_toks = got.split(), expected.split()
    if len(g_toks) != len(e_toks):
        return False
    for g, e in zip(g_toks, e_toks):
        if g == e:
            continue
        if (any_number or _is_float_literal(e)) and _num_close(g, e, tol):
            continue
        return False
    return True


_SEQ = frozenset({"L", "T", "Q"})


def _is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, tuple)


def _dict_key(k):
    return k if isinstance(k, str) else repr(k)


def canonical_equal(got, exp) -> bool:
    """Equality of canonical forms with the leniencies in the module docstring (minus the unwrap)."""
    if _is_num(got) and _is_num(exp) and (isinstance(got, float) or isinstance(exp, float)):
        return math.isclose(got, exp, rel_tol=DEFAULT_TOL, abs_tol=DEFAULT_TOL)
    if isinstance(got, tuple) and isinstance(exp, tuple):
        tg, bg = got
        te, be = exp
        if tg in _SEQ and te in _SEQ:
            return len(bg) == len(be) and all(canonical_equal(a, b) for a, b in zip(bg, be))
        if tg == "S" and te in _SEQ | {"S"}:
            return bg == frozenset(be)
        if tg == te == "D":
            gd = {_dict_key(k): v for k, v in bg}
            ed = {_dict_key(k): v for k, v in be}
            return gd.keys() == ed.keys() and all(canonical_equal(gd[k], ed[k]) for k in ed)
        return got == exp
    if isinstance(got, tuple) != isinstance(exp, tuple):
        return False
    return type(got) is type(exp) and got == exp or (_is_num(got) and _is_num(exp) and got == exp)


def functional_equal(got, exp) -> bool:
    """`got` (canonical result) equals `exp` (canonical expected), incl. APPS single-element unwrap."""
    if canonical_equal(got, exp):
        return True
    return isinstance(exp, tuple) and exp[0] == "L" and len(exp[1]) == 1 and canonical_equal(got, exp[1][0])
