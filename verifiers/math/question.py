"""Answer forms a question requires ("Express your answer as a common fraction"), checked on answers
already judged equal in value.

`required_forms(question)` reads the question once (cached) against a small registry of stated forms,
each a bounded pattern on the question text; `check_forms(question, gold, answer)` then tests the
extracted answer against each form found. Rules (name: what the question says -> what is required):

    fraction   "as a (common / improper) fraction", "in lowest terms"  -> one fraction of integers (an
               integer counts), no decimal, no mixed number; with "simplest radical form" or "in
               terms of pi" the numerator and denominator may hold square roots or pi
    mixed      "as a mixed number"                    -> an integer, a proper fraction or whole + one
    decimal    "as a decimal"                         -> a decimal numeral (no fraction, radical, pi or
               percent), with at most the places a stated precision allows ("to the nearest tenth")
    precision  "to the nearest tenth / whole number" without "as a decimal" -> a decimal answer has at
               most that many places; an exact answer (`\\frac{1587}{52}` for 30.52) is not refused
    radical    "simplest radical form"                -> no decimal, square-free radicands, no root in a
               denominator or over a fraction
    pi         "in terms of pi"                       -> pi appears, no decimal
    interval   "in interval notation"                 -> no inequality sign, no equation
    equation   "answer / the equation ... in the form y = mx + b" -> `y = ...` with no `y` on the right
    linear     "in the form Ax + By + Cz + D = 0" with "A > 0", "gcd(|A|,...) = 1" -> integer
               coefficients meeting those conditions

Guarantees: a question that states none of these leaves the verdict untouched (`check_forms` returns
None); bounded work on any text (patterns with bounded spans, square factors tried up to 1000**2),
and never raises on model text; a rule is applied only when the reference answer itself passes it,
so a reference written in another form (or a form this module misreads) never turns a correct
answer wrong; rules only reject.
Not guaranteed: forms stated in other words are not recognized, and a form is checked on the answer
string, not on what the model meant.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

SQUARE_FACTOR_LIMIT = 1000  # radicands are tested for square factors k**2 with k up to this
QUESTION_SCAN_CHARS = 20_000  # forms are stated near the question's end; longer text is cut from the front

Check = Callable[[str], str | None]  # a normalized answer -> None when in the form, else why not


@dataclass(frozen=True)
class FormRule:
    name: str
    stated: str  # the words of the question that state the form
    check: Check


@dataclass(frozen=True)
class FormOutcome:
    rejected_by: str | None = None  # the rule name, when the answer is not in a required form
    reason: str = ""
    checked: tuple[str, ...] = ()  # rules the answer passed
    skipped: tuple[str, ...] = field(default=())  # rules not applied: the reference is not in that form


# ------------------------------------------------------------------------------------ normalization
_SPACING = re.compile(r"\\[,;:! ]|\\left|\\right|\\displaystyle|\s+")
_UNIT_TAIL = re.compile(r"(?:\\(?:text|mbox|mathrm|textnormal)\{[^{}]*\}|\^\{?\\circ\}?|\\circ|°|degrees?)$")
_FRAC_SHORT = re.compile(r"\\frac(\{[^{}]*\}|\d|\\pi)(\{[^{}]*\}|\d)")
NUM = r"(?:\d{1,3}(?:(?:,|\{,\})\d{3})+|\d+)"
_DECIMAL_POINT = re.compile(r"\d\.\d|(?<![\d.])\.\d")


def normalize(answer: str) -> str:
    """The answer without spacing, `$`, `\\left/\\right`, a leading `\\$` or a trailing unit, with
    `\\dfrac`/`\\tfrac` as `\\frac` and the short forms `\\frac12` braced."""
    s = _SPACING.sub("", answer.strip().strip("$"))
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("π", "\\pi")
    if s.startswith("\\$"):
        s = s[2:]
    for _ in range(3):
        s = _UNIT_TAIL.sub("", s)
    return _FRAC_SHORT.sub(lambda m: f"\\frac{_braced(m.group(1))}{_braced(m.group(2))}", s)


def _braced(group: str) -> str:
    return group if group.startswith("{") else "{" + group + "}"


def _frac_parts(s: str) -> list[tuple[str, str]]:
    """(numerator, denominator) of every `\\frac{..}{..}` in `s`, nested braces matched."""
    out, start = [], 0
    while (at := s.find("\\frac{", start)) >= 0:
        num, end = _group(s, at + 5)
        den, end2 = _group(s, end) if end < len(s) and s[end] == "{" else ("", end)
        out.append((num, den))
        start = at + 5
    return out


def _group(s: str, at: int) -> tuple[str, int]:
    """The braced group opening at `s[at]` (its content) and the index after it."""
    depth = 0
    for j in range(at, len(s)):
        depth += {"{": 1, "}": -1}.get(s[j], 0)
        if depth == 0:
            return s[at + 1:j], j + 1
    return s[at + 1:], len(s)


def _int(text: str) -> int:
    return int(text.replace("{,}", "").replace(",", ""))


# ------------------------------------------------------------------------------------------- checks
def fraction_check(extras: bool, lowest: bool) -> Check:
    term = rf"(?:{NUM}(?:\\sqrt\{{\d+\}}|\\sqrt\d|\\pi)*|(?:\\sqrt\{{\d+\}}|\\sqrt\d|\\pi)+)" if extras else NUM
    whole = re.compile(rf"^-?(?:{term}|\\frac\{{-?({term})\}}\{{({term})\}}|({term})/({term}))$")

    def check(s: str) -> str | None:
        if _DECIMAL_POINT.search(s):
            return "the answer has a decimal"
        if re.match(rf"^-?{NUM}\\frac", s):
            return "the answer is a mixed number"
        m = whole.match(s)
        if m is None:
            return "the answer is not one fraction of integers"
        num, den = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        if lowest and num and re.fullmatch(NUM, num) and re.fullmatch(NUM, den):
            if math.gcd(_int(num), _int(den)) != 1:
                return "the fraction is not in lowest terms"
        return None

    return check


def mixed_check(s: str) -> str | None:
    m = re.fullmatch(rf"-?({NUM})?(?:\\frac\{{({NUM})\}}\{{({NUM})\}})?", s)
    if m is None or not (m.group(1) or m.group(2)):
        return "the answer is not a mixed number"
    if m.group(2) and _int(m.group(2)) >= _int(m.group(3)):
        return "the fraction part is improper"
    return None


def decimal_check(places: int | None) -> Check:
    def check(s: str) -> str | None:
        m = re.fullmatch(rf"-?(?:{NUM})?(?:\.(\d+))?", s)
        if m is None or s in ("", "-"):
            return "the answer is not a decimal numeral"
        if places is not None and m.group(1) and len(m.group(1)) > places:
            return f"more than {places} decimal places"
        return None

    return check


def precision_check(places: int) -> Check:
    """A stated precision alone ("round to the nearest tenth") limits a decimal answer's places; an
    exact answer (`\\frac{1587}{52}` for 30.52) is not a decimal and keeps its verdict."""
    def check(s: str) -> str | None:
        m = re.fullmatch(rf"-?(?:{NUM})?\.(\d+)", s.replace("\\%", ""))
        return f"more than {places} decimal places" if m and len(m.group(1)) > places else None

    return check


def radical_check(s: str) -> str | None:
    if _DECIMAL_POINT.search(s):
        return "the answer has a decimal"
    for radicand in re.findall(r"\\sqrt(?:\{(\d+)\}|(\d))", s):
        n = int(radicand[0] or radicand[1])
        # square factors up to SQUARE_FACTOR_LIMIT**2 (and n a perfect square): bounded work on any radicand
        limit = min(math.isqrt(n), SQUARE_FACTOR_LIMIT)
        if n < 2 or math.isqrt(n) ** 2 == n or any(n % (k * k) == 0 for k in range(2, limit + 1)):
            return f"the radicand {n} is not square-free"
    if re.search(r"\\sqrt\{[^{}]*(?:\\frac|/)", s):
        return "a fraction under the root"
    if any("\\sqrt" in den for _, den in _frac_parts(s)) or re.search(r"/\(?\d*\\sqrt", s):
        return "a root in the denominator"
    return None


def pi_check(s: str) -> str | None:
    if "\\pi" not in s:
        return "the answer has no pi"
    return "the answer has a decimal" if _DECIMAL_POINT.search(s) else None


_INEQUALITY = re.compile(r"<|>|\\le|\\ge|\\lt|\\gt|≤|≥|=")


def interval_check(s: str) -> str | None:
    return "an inequality or equation, not an interval" if _INEQUALITY.search(s) else None


def equation_check(var: str) -> Check:
    def check(s: str) -> str | None:
        lhs, eq, rhs = s.partition("=")
        if not eq or lhs != var or not rhs or "=" in rhs:
            return f"the answer is not an equation `{var} = ...`"
        if re.search(rf"(?<![a-zA-Z\\]){var}(?![a-zA-Z])", rhs):
            return f"`{var}` appears on the right-hand side"
        return None

    return check


_FORM_TERM = re.compile(r"([+-]?)([A-Z])([a-z]?)")
_ANSWER_TERM = re.compile(r"([+-]?)(\d*)(?:\\cdot|\*)?([a-z]?)")


def linear_form(form: str) -> dict[str, tuple[str | None, int]] | None:
    """`Ax + By + Cz + D = 0` -> {letter: (variable or None, sign in lhs - rhs)}; None if not that shape."""
    sides = form.split("=")
    if len(sides) != 2:
        return None
    letters: dict[str, tuple[str | None, int]] = {}
    for side_sign, side in ((1, sides[0]), (-1, sides[1])):
        if side == "0":
            continue
        terms = _FORM_TERM.findall(side)
        if not terms or "".join("".join(t) for t in terms) != side:
            return None
        for sign, letter, var in terms:
            letters[letter] = (var or None, side_sign * (-1 if sign == "-" else 1))
    variables = [v for v, _ in letters.values() if v]
    return letters if variables and len(set(variables)) == len(variables) else None


def linear_coefficients(s: str) -> dict[str | None, int] | None:
    """Integer coefficients of lhs - rhs of a linear equation (None: the constant), or None."""
    sides = s.split("=")
    if len(sides) != 2 or not all(sides):
        return None
    out: dict[str | None, int] = {}
    for side_sign, side in ((1, sides[0]), (-1, sides[1])):
        pos = 0
        while pos < len(side):
            m = _ANSWER_TERM.match(side, pos)
            if m is None or m.end() == pos or not (m.group(2) or m.group(3)) or (pos and not m.group(1)):
                return None
            coefficient = int(m.group(2) or 1) * (-1 if m.group(1) == "-" else 1)
            var = m.group(3) or None
            out[var] = out.get(var, 0) + side_sign * coefficient
            pos = m.end()
    return out


def linear_check(letters: dict[str, tuple[str | None, int]], positive: tuple[str, ...],
                 gcd_of: tuple[str, ...]) -> Check:
    def check(s: str) -> str | None:
        coefficients = linear_coefficients(s)
        allowed = {v for v, _ in letters.values()}
        if coefficients is None or not set(coefficients) <= allowed:
            return "the answer is not a linear equation with integer coefficients in the form's variables"
        value = {letter: sign * coefficients.get(var, 0) for letter, (var, sign) in letters.items()}
        for letter in positive:
            if letter in value and value[letter] <= 0:
                return f"{letter} = {value[letter]}, the question requires {letter} > 0"
        if gcd_of and math.gcd(*(abs(value.get(x, 0)) for x in gcd_of)) != 1:
            return f"gcd of {', '.join(gcd_of)} is not 1"
        return None

    return check


# ----------------------------------------------------------------------------------------- registry
_I = re.IGNORECASE | re.DOTALL
_FRACTION = re.compile(r"\b(?:answer|result|expressed|express\s+it|it)\s+as\s+an?\s+"
                       r"(?:(?:common|improper|simplified)\s+)?fraction\b(?!\s*\$)|in\s+(?:lowest|simplest)\s+terms"
                       r"|simplest\s+fractional\s+form", _I)
_LOWEST = re.compile(r"lowest\s+terms|simplest\s+(?:terms|fractional)|simplified\s+fraction|reduced\s+fraction", _I)
_MIXED = re.compile(r"\bas\s+a\s+mixed\s+number", _I)
_DECIMAL = re.compile(r"(?:\b(?:answer|result|expressed|express\s+it|it)|\b(?:write|convert)\s[^.?]{0,80}?|\()"
                      r"\s*(?:as|to)\s+an?\s+(?:terminating\s+)?decimal\b", _I)
_NEAREST = re.compile(r"\b(?:answer|express\w*|round\w*|result)\b[^.?]{0,60}?\bto\s+the\s+nearest\s+"
                      r"(tenth|hundredth|thousandth|ten-thousandth|whole\s+number|integer|cent|dollar)\b", _I)
_PLACES = {"tenth": 1, "hundredth": 2, "thousandth": 3, "ten-thousandth": 4, "cent": 2}
_RADICAL = re.compile(r"simplest\s+radical\s+form", _I)
_PI = re.compile(r"in\s+terms\s+of\s+(?:\$\s*\\pi\s*\$|\\pi\b|π|pi\b)", _I)
_INTERVAL = re.compile(r"\binterval\s+notation\b", _I)
_IN_THE_FORM = re.compile(
    r"\b(?:enter|write|give|express|put)\s+(?:your\s+answer|the\s+(?:equation|answer)[^.?$]{0,60}?|it)\s+"
    r"in\s+the\s+form\s*[:\"“]?\s*(?:\$\$?|\\\[|\\\()\s*(.{1,80}?)\s*(?:\$|\\\]|\\\)|\")", _I)
_POSITIVE = re.compile(r"\b([A-Z])\s*>\s*0")
_GCD = re.compile(r"\\gcd\s*\(([^)]*)\)\s*=\s*1")


@functools.lru_cache(maxsize=4096)
def required_forms(question: str) -> tuple[FormRule, ...]:
    """The answer forms `question` states (empty when none is recognized)."""
    q = question[-QUESTION_SCAN_CHARS:]
    rules: list[FormRule] = []
    radical, pi = _RADICAL.search(q), _PI.search(q)
    if m := _FRACTION.search(q):
        rules.append(FormRule("fraction", m.group(0), fraction_check(bool(radical or pi), bool(_LOWEST.search(q)))))
    if m := _MIXED.search(q):
        rules.append(FormRule("mixed", m.group(0), mixed_check))
    nearest = _NEAREST.search(q)
    places = _PLACES.get(re.sub(r"\s+", " ", nearest.group(1).lower()), 0) if nearest else None
    if m := _DECIMAL.search(q):
        rules.append(FormRule("decimal", m.group(0), decimal_check(places)))
    elif nearest:
        rules.append(FormRule("precision", nearest.group(0), precision_check(places)))
    if radical:
        rules.append(FormRule("radical", radical.group(0), radical_check))
    if pi:
        rules.append(FormRule("pi", pi.group(0), pi_check))
    if m := _INTERVAL.search(q):
        rules.append(FormRule("interval", m.group(0), interval_check))
    if m := _IN_THE_FORM.search(q):
        rules.extend(_form_rule(m, q))
    return tuple(rules)


def _form_rule(m: re.Match, q: str) -> list[FormRule]:
    form = normalize(m.group(1)).rstrip(",.")
    if re.fullmatch(r"[a-z]=.+", form) and "=" not in form[2:]:
        return [FormRule("equation", m.group(0), equation_check(form[0]))]
    letters = linear_form(form)
    if letters is None:
        return []
    after = q[m.end():m.end() + 300]
    positive = tuple(x for x in _POSITIVE.findall(after) if x in letters)
    gcd_of = tuple(x for g in _GCD.findall(after) for x in re.findall(r"[A-Z]", g) if x in letters)
    return [FormRule("linear", m.group(0), linear_check(letters, positive, gcd_of))]


def check_forms(question: str | None, gold: str, answer: str) -> FormOutcome | None:
    """The forms `question` requires, checked on `answer` (whose value already equals `gold`'s).
    None when the question states no recognized form."""
    rules = required_forms(question) if question else ()
    if not rules:
        return None
    g, a = normalize(gold), normalize(answer)
    checked, skipped = [], []
    for rule in rules:
        try:
            gold_why, why = rule.check(g), rule.check(a)
        except (ValueError, OverflowError, RecursionError):  # a form that cannot be read is not a refusal
            skipped.append(rule.name)
            continue
        if gold_why is not None:
            skipped.append(rule.name)  # the reference is not in this form: the rule cannot be meant
            continue
        if why is not None:
            stated = " ".join(rule.stated.split())
            return FormOutcome(rule.name, f"the question asks for {stated!r}: {why}",
                               tuple(checked), tuple(skipped))
        checked.append(rule.name)
    return FormOutcome(None, "", tuple(checked), tuple(skipped))
