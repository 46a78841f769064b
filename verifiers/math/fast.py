"""Exact fast path: decide simple answers with exact arithmetic, before any sympy work.

Most RL math answers are plain numbers or short LaTeX. When both the reference and the extracted
answer read as one of

    integer        42, -7, +3, 007, 1,234,567 / 1{,}234 / 10,\\!080 (thousands groups of three digits)
    decimal        3.5, -.25, 1,234.5
    fraction       3/4, \\frac{3}{4}, \\dfrac34, \\tfrac{3}{4}, -\\frac{\\sqrt{3}}{2}
    radical        \\sqrt{12}, 2\\sqrt{5}, \\frac{3\\sqrt{2}}{4}
    multiple of π  4\\pi, \\frac{\\pi}{3}, 18+2\\pi, \\pi^2
    complex        1+2i, 6 - 5i
    polynomial     2k+2, 8n^2 + 4n + 1, p - q (lower-case letters other than e and i; no words)
    sums           1+\\sqrt{2}, 3 - 2\\pi (sums, differences, products and quotients of the above)
    tuple          (1, \\frac{1}{2}), [2, 3\\sqrt{2}], (2,\\infty) (two or more, same brackets)
    word           \\text{east}, \\text{(C)}
    matrix         \\begin{pmatrix} 1 \\\\ -2 \\end{pmatrix} (same shape: element by element; against a number: wrong)
    (a trailing ^\\circ and a leading \\$ are dropped first, as math-verify drops them)

the value is computed exactly as a rational linear combination of `sqrt(n) * pi**k * i**j * monomial`
(n square-free); those terms are linearly independent over the rationals, so equal combinations mean
equal values and different ones different values. The verdict:

    equal values (tuples: same brackets, equal element by element)       -> correct
    different values, not nearly equal, not tiny or huge; with a decimal
      involved only when more than FAR_RELATIVE apart                    -> wrong
    a number against a non-empty interval or a (...) tuple; a word
      against a number                                                   -> wrong
    anything else (a percent, units, a mixed number, 1/2\\pi, (1,234),
      a lone letter that may be a choice, ...)                           -> undecided: the sympy path
                                                                            applies math-verify's rules

Guarantee: a decided verdict is the verdict the sympy path (math-verify + our guard) gives for the
same pair; `tests/verifiers/test_math_fastpath.py` checks this over every answer of MATH-500, GSM8K
and math-verify's own case set. Never raises; bounded work (`MAX_CHARS`, `MAX_DIGITS`, `MAX_TERMS`).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

MAX_DIGITS = 40
MAX_CHARS = 200
MAX_TERMS = 16
MAX_RADICAND = 10**8  # square-free part by trial division: at most 10^4 steps (hostile input stays cheap)
NEAR_RELATIVE = 1e-9  # values this close may round together in math-verify: defer
FAR_RELATIVE = 1e-3  # with a decimal involved (math-verify rounds floats to 6 places) only this far is wrong
TINY, HUGE = 1e-6, 1e15  # outside this magnitude range math-verify's chop/precision may differ: defer

Value = dict  # {(square-free n, power of pi, power of i, monomial): Fraction}, no zero coefficients
ONE = (1, 0, 0, ())


class _Defer(Exception):
    """The text is outside the grammar (or too big): leave the pair to the sympy path."""


_INT = r"(?:\d+|[1-9]\d{0,2}(?:,\d{3})+)"
_NUMBER = re.compile(rf"^(?P<sign>[+-]?)(?P<int>{_INT})?(?P<dec>\.\d*)?$")
_SLASH = re.compile(rf"^(?P<sign>[+-]?)(?P<num>{_INT})\s*/\s*(?P<den>{_INT})$")
_FRAC = re.compile(r"^(?P<sign>[+-]?)\s*\\[dt]?frac\{\s*(?P<num>\d+)\s*\}\{\s*(?P<den>\d+)\s*\}$")
_SPACES = re.compile(r"\\[!,;: ]|\s+|\\left|\\right")
_TOKEN = re.compile(r"\d+(?:\.\d*)?|\.\d+|\\[dt]?frac|\\sqrt|\\pi|\\infty|[-+*/^{}()\[\],a-z]|\\cdot|\\times")
_TEXT = re.compile(r"^\\(?:text|textbf|mbox)\{\s*([A-Za-z][A-Za-z ]*|\([A-Z]\))\s*\}$")
_DEGREES = re.compile(r"\^\{?\\circ\}?$")
INF = ("inf",)
_PMATRIX = re.compile(r"^\\begin\{pmatrix\}(.*)\\end\{pmatrix\}$", re.DOTALL)


def parse_simple_number(text: str) -> tuple[Fraction, bool] | None:
    """(value, is_decimal) for a plain rational number (integer, decimal, a/b, \\frac{a}{b}), else None."""
    text = text.strip()
    if not text or sum(ch.isdigit() for ch in text) > MAX_DIGITS:
        return None
    match = _NUMBER.match(text)
    if match and (match.group("int") or (match.group("dec") or "").strip(".")):
        digits = (match.group("int") or "0").replace(",", "") + (match.group("dec") or "")
        value = Fraction(digits.removesuffix("."))
        return (-value if match.group("sign") == "-" else value), match.group("dec") is not None
    match = _SLASH.match(text) or _FRAC.match(text)
    if match:
        den = int(match.group("den").replace(",", ""))
        if den == 0:
            return None
        value = Fraction(int(match.group("num").replace(",", "")), den)
        return (-value if match.group("sign") == "-" else value), False
    return None


# ------------------------------------------------------------------------------------------ values
def _squarefree(n: int) -> tuple[int, int]:
    """(s, m) with n = s*s*m and m square-free; n <= MAX_RADICAND."""
    if n > MAX_RADICAND:
        raise _Defer
    s, m, p = 1, 1, 2
    while p * p <= n:
        while n % (p * p) == 0:
            n //= p * p
            s *= p
        if n % p == 0:
            n //= p
            m *= p
        p += 1
    return s, m * n


def _const(q: Fraction) -> Value:
    return {ONE: q} if q else {}


def _mono(a: tuple, b: tuple) -> tuple:
    powers = dict(a)
    for var, exp in b:
        powers[var] = powers.get(var, 0) + exp
    return tuple(sorted(powers.items()))


def _add(a: Value, b: Value, sign: int = 1) -> Value:
    out = dict(a)
    for key, q in b.items():
        total = out.get(key, 0) + sign * q
        if total:
            out[key] = total
        else:
            out.pop(key, None)
    return out


def _mul(a: Value, b: Value) -> Value:
    out: Value = {}
    for (n1, k1, j1, m1), q1 in a.items():
        for (n2, k2, j2, m2), q2 in b.items():
            s, n = _squarefree(n1 * n2)
            sign = -1 if j1 + j2 == 2 else 1  # i * i = -1
            out = _add(out, {(n, k1 + k2, (j1 + j2) % 2, _mono(m1, m2)): q1 * q2 * s * sign})
    if len(out) > MAX_TERMS:
        raise _Defer
    return out


def _inverse(a: Value) -> Value:
    if len(a) != 1:  # 1 / (1 + sqrt 2): rationalising is possible but not needed here
        raise _Defer
    (n, k, j, mono), q = next(iter(a.items()))
    if mono:
        raise _Defer  # division by a variable: a rational function, left to math-verify
    return {(n, -k, j, ()): (-1 if j else 1) / (q * n)}  # 1 / (q sqrt(n) pi^k i^j) = sqrt(n) / (q n) pi^-k (-i)^j


def _sqrt(a: Value) -> Value:
    if not a:
        return {}
    q = a.get(ONE)
    if len(a) != 1 or q is None or q < 0:
        raise _Defer
    s, m = _squarefree(q.numerator * q.denominator)
    return {(m, 0, 0, ()): Fraction(s, q.denominator)}


def _power(a: Value, e: Value) -> Value:
    exp = e.get(ONE)
    if len(e) != 1 or exp is None or exp.denominator != 1:
        raise _Defer
    if set(a) <= {ONE} and abs(exp) <= 64 and (a or exp > 0):  # a rational power: 2^{10}, 2^{-3}
        value = a.get(ONE, Fraction(0)) ** int(exp)
        if len(str(value.numerator)) + len(str(value.denominator)) > MAX_DIGITS:
            raise _Defer
        return _const(value)
    if not 0 <= exp <= 8:
        raise _Defer
    out = _const(Fraction(1))
    for _ in range(int(exp)):
        out = _mul(out, a)
    return out


def _real(a: Value) -> bool:
    """Only real constants (no i, no variables, no text or infinity)."""
    return all(len(key) == 4 and not key[2] and not key[3] for key in a)


def _is_text(a: Value) -> bool:
    return any(key[0] == "text" for key in a)


def _float(a: Value) -> float:
    if INF in a:
        return math.inf * a[INF]
    return sum(float(q) * math.sqrt(n) * math.pi ** k for (n, k, _j, _m), q in a.items())


# ------------------------------------------------------------------------------------------ parsing
_IMPLICIT = ("\\sqrt", "\\pi", "i")  # factors that may follow another without an operator: 2\sqrt{3}, 3\pi, 5i


class _Parser:
    """Recursive descent over the small grammar in the module docstring; raises _Defer outside it."""

    def __init__(self, tokens: list[str]):
        self.tokens, self.pos, self.decimal = tokens, 0, False

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise _Defer
        self.pos += 1
        return tok

    def expr(self) -> Value:
        sign = -1 if self.peek() == "-" else 1
        if self.peek() in ("+", "-"):
            self.take()
        value = _mul(_const(Fraction(sign)), self.term())
        while self.peek() in ("+", "-"):
            sign = 1 if self.take() == "+" else -1
            value = _add(value, self.term(), sign)
        return value

    def term(self) -> Value:
        value = self.power()
        while True:
            tok = self.peek()
            if tok in ("*", "\\cdot", "\\times"):
                self.take()
                value = _mul(value, self.power())
            elif tok == "/":
                self.take()
                value = _mul(value, _inverse(self.power()))
                if self.peek() in _IMPLICIT or _is_var(self.peek()):
                    raise _Defer  # 1/2\pi: (1/2)π or 1/(2π)? left to math-verify
            elif tok in _IMPLICIT or _is_var(tok):  # never 2\frac12 (a mixed number?) or 2 3
                value = _mul(value, self.power())
            else:
                return value

    def power(self) -> Value:
        base = self.atom()
        if self.peek() != "^":
            return base
        self.take()
        return _power(base, self.atom())

    def atom(self) -> Value:
        tok = self.take()
        if tok[0].isdigit() or tok[0] == ".":
            self.decimal = self.decimal or "." in tok
            return _const(Fraction(tok.removesuffix(".")))
        if tok == "\\pi":
            return {(1, 1, 0, ()): Fraction(1)}
        if tok == "i":
            return {(1, 0, 1, ()): Fraction(1)}
        if _is_var(tok):
            return {(1, 0, 0, ((tok, 1),)): Fraction(1)}
        if tok == "\\sqrt":
            return _sqrt(self.group())
        if tok in ("\\frac", "\\dfrac", "\\tfrac"):
            num = self.group()
            return _mul(num, _inverse(self.group()))
        if tok == "{":
            self.pos -= 1
            return self.group()
        raise _Defer

    def group(self) -> Value:
        self.take("{")
        value = self.expr()
        self.take("}")
        return value


def _is_var(tok: str | None) -> bool:
    # Lower-case letters only (math-verify reads a lone capital as a choice, `A` == `a`); not e (Euler)
    # or i (the imaginary unit), which math-verify reads as constants.
    return tok is not None and len(tok) == 1 and "a" <= tok <= "z" and tok not in "ei"


def _tokens(text: str) -> list[str]:
    pos, out = 0, []
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise _Defer
        out.append(match.group(0))
        pos = match.end()
    return out


def _scalar(text: str) -> tuple[Value, bool]:
    simple = parse_simple_number(text)
    if simple is not None:
        return _const(simple[0]), simple[1]
    if text in ("\\infty", "+\\infty", "-\\infty"):
        return {INF: -1 if text[0] == "-" else 1}, False
    text_match = _TEXT.match(text)
    if text_match:
        return {("text", text_match.group(1).lower()): 1}, False
    if "," in text or (len(text) == 1 and text.isalpha()) or re.search(r"(?<![\\a-z])[a-z]{3}", text):
        raise _Defer  # a lone letter may be a choice (a == A there); three letters may be a word
    parser = _Parser(_tokens(text))
    value = parser.expr()
    if parser.peek() is not None:
        raise _Defer
    return value, parser.decimal


def _normalize(text: str) -> str:
    if len(text) > MAX_CHARS or sum(ch.isdigit() for ch in text) > MAX_DIGITS or re.search(r"\d\s+\d", text):
        raise _Defer
    text = _SPACES.sub("", text.replace("{,}", ","))
    text = _DEGREES.sub("", text.removeprefix("\\$"))  # math-verify drops a currency sign and degrees
    text = re.sub(r"\\([dt]?frac)(\d)(\d)", r"\\\1{\2}{\3}", text)  # \frac14 -> \frac{1}{4}
    text = re.sub(r"\\([dt]?frac)(\d)\{", r"\\\1{\2}{", text)  # \frac9{19}
    return re.sub(r"\\sqrt(\d)", r"\\sqrt{\1}", text)


def read_answer(text: str) -> tuple[str, list[Value], bool] | None:
    """(brackets, values, has_decimal) for a scalar ("" brackets, one value) or a tuple; None outside."""
    try:
        if _TEXT.match(text.strip()):
            return "", [{("text", _TEXT.match(text.strip()).group(1).lower()): 1}], False
        matrix = _PMATRIX.match(text.strip())
        if matrix:  # before _normalize, which would eat the `\\\\` row separators
            rows = [row.split("&") for row in matrix.group(1).split("\\\\")]
            if len({len(row) for row in rows}) != 1:
                return None
            cells = [_scalar(_normalize(cell)) for row in rows for cell in row]
            shape = f"pmatrix {len(rows)}x{len(rows[0])}"
            return shape, [v for v, _ in cells], any(d for _, d in cells)
        text = _normalize(text)
        if len(text) >= 2 and text[0] in "([" and text[-1] in ")]" and "," in text:
            inner = text[1:-1]
            if re.search(r"\d,\d{3}(?!\d)", inner) or any(ch in inner for ch in "()[]"):
                return None  # (1,234): thousands or a pair? nested brackets: left to math-verify
            parts = [_scalar(part) for part in inner.split(",")]
            return text[0] + text[-1], [v for v, _ in parts], any(d for _, d in parts)
        value, decimal = _scalar(text)
        if INF in value:
            return None  # a bare infinity: only inside intervals here
        return "", [value], decimal
    except (_Defer, ZeroDivisionError, ValueError, OverflowError, RecursionError):
        return None


# ------------------------------------------------------------------------------------------ verdicts
def _clearly_different(a: Value, b: Value, decimal: bool) -> bool:
    """Different values math-verify cannot round together. Exact rationals, complex numbers,
    polynomials, words: any difference. Otherwise neither may be tiny or huge (math-verify's `chop` and
    precision) and they must differ by more than NEAR_RELATIVE, or FAR_RELATIVE when a decimal is
    involved (math-verify rounds floats to 6 places)."""
    if a == b:
        return False
    if _is_text(a) != _is_text(b):  # a word against a number only (`\\text{odd}` == `odd` in math-verify)
        return _real(b if _is_text(a) else a) and not decimal
    if not (_real(a) and _real(b)):
        return not decimal
    if set(a) <= {ONE} and set(b) <= {ONE} and not decimal:
        return True
    fa, fb = _float(a), _float(b)
    if any(v and not TINY <= abs(v) <= HUGE for v in (fa, fb)):
        return False
    return abs(fa - fb) > (FAR_RELATIVE if decimal else NEAR_RELATIVE) * max(abs(fa), abs(fb), 1.0)


def _rounds_to(gold: str, reference: Value, value: Value) -> bool:
    """The exact `value` is within half a unit of the decimal reference's last place."""
    match = re.search(r"\.(\d+)\s*$", gold)
    if match is None or not (_real(value) and _real(reference)) or INF in value or INF in reference:
        return False
    return abs(_float(value) - _float(reference)) <= 0.5 * 10 ** -len(match.group(1)) * (1 + 1e-9)


def _plain_interval(values: list[Value]) -> bool:
    """A 2-tuple reads as an interval in math-verify; only a non-empty real one has a plain meaning."""
    if len(values) != 2:
        return True
    if not all(_real(v) or INF in v for v in values):
        return False
    return _float(values[0]) < _float(values[1])


def fast_verdict(gold: str, pred: str) -> bool | None:
    """True/False when decidable exactly (see module docstring), None to defer to the sympy path."""
    if ("\\circ" in gold) != ("\\circ" in pred) and "\\pi" in gold + pred:
        return None  # degrees against radians: the shape rules' (scalerl.verifiers.math.rules)
    g, p = read_answer(gold), read_answer(pred)
    if g is None or p is None:
        return None
    if g[2] and not p[2] and len(g[1]) == len(p[1]) == 1 and _rounds_to(gold, g[1][0], p[1][0]):
        return None  # an exact answer against a rounded reference: scalerl.verifiers.math.forms decides
    (gb, gv, gd), (pb, pv, pd) = g, p
    try:
        if bool(gb) != bool(pb):  # a number against a tuple, an interval or a matrix
            shape = gb or pb
            return False if "(" in shape or "pmatrix" in shape or _plain_interval(gv if gb else pv) else None
        if gb != pb or len(gv) != len(pv):
            return None
        if gv == pv:
            return True
        if not gb.startswith("pmatrix") and not (_plain_interval(gv) and _plain_interval(pv)):
            return None
        return False if any(_clearly_different(a, b, gd or pd) for a, b in zip(gv, pv)) else None
    except (OverflowError, ValueError):
        return None
