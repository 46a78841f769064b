"""Math task families: short prompts ("12+7=") with exact answers, graded by the math verifier.

Each family is `make(rng, level) -> Generated`. Answers are exact (integers, terminating decimals
written out in full, fractions in lowest terms as `\\frac{p}{q}`), so the gold completion
`\\boxed{answer}` is `correct` by construction and any equivalent form a model writes is left to the
verifier. Operand ranges grow with the level.

Level 0 (the built-in tiny model) is two-digit addition without carries and subtraction without
borrows (`34+52=`, `87-32=`): every answer digit is one of 100 single-digit facts applied to aligned
digits, so a problem never seen in training uses facts seen thousands of times and a ~1M-parameter
character model generalizes to held-out prompts. Small-operand tables (`a+b` with a, b ≤ 19, `a*b` with
a, b ≤ 9) would not: a held-out `7*8` needs a fact the model never saw.
"""

from __future__ import annotations

import math
import random
from decimal import Decimal
from fractions import Fraction

from .types import Generated


def _span(level: int) -> int:
    """Largest operand for additive tasks at level >= 1: 99, 999, ..."""
    return 10 ** (level + 1) - 1


def _int(rng: random.Random, hi: int, level: int) -> int:
    """An operand in [0, hi], negative allowed from level 2 on."""
    value = rng.randint(0, hi)
    return -value if level >= 2 and rng.random() < 0.3 else value


def _fmt(value: int) -> str:
    """An operand as it appears in a prompt: negatives parenthesized so `3--4` never appears."""
    return f"({value})" if value < 0 else str(value)


def _problem(prompt: str, answer: str) -> Generated:
    return Generated(prompt=prompt, answer=answer, solution=f"\\boxed{{{answer}}}")


def _frac_text(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def _decimal_text(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "0") else text


def _digit_pairs(rng: random.Random, op: str) -> tuple[int, int]:
    """Level 0: two-digit a, b whose digits combine without a carry (+) or a borrow (−), and whose
    result has two digits (so every answer digit is a single-digit fact on aligned digits)."""
    if op == "+":
        ta = rng.randint(1, 8)
        tb = rng.randint(1, 9 - ta)
        oa = rng.randint(0, 9)
        ob = rng.randint(0, 9 - oa)
    else:
        ta = rng.randint(2, 9)
        tb = rng.randint(1, ta - 1)
        oa = rng.randint(0, 9)
        ob = rng.randint(0, oa)
    return 10 * ta + oa, 10 * tb + ob


def add(rng: random.Random, level: int) -> Generated:
    if level == 0:
        a, b = _digit_pairs(rng, "+")
    else:
        a, b = _int(rng, _span(level), level), _int(rng, _span(level), level)
    return _problem(f"{_fmt(a)}+{_fmt(b)}=", str(a + b))


def sub(rng: random.Random, level: int) -> Generated:
    if level == 0:
        a, b = _digit_pairs(rng, "-")
    else:
        a, b = _int(rng, _span(level), level), _int(rng, _span(level), level)
    return _problem(f"{_fmt(a)}-{_fmt(b)}=", str(a - b))


def mul(rng: random.Random, level: int) -> Generated:
    hi_a = 10 ** (1 + (level + 1) // 2) - 1  # from level 1 (MATH_FAMILIES)
    hi_b = 10 ** (1 + level // 2) - 1
    a, b = _int(rng, hi_a, level), _int(rng, hi_b, level)
    return _problem(f"{_fmt(a)}*{_fmt(b)}=", str(a * b))


def decimal(rng: random.Random, level: int) -> Generated:
    places = min(level, 4)
    scale = Decimal(10) ** -places
    a = Decimal(rng.randint(0, 10 ** (places + 2))) * scale
    b = Decimal(rng.randint(0, 10 ** (places + 2))) * scale
    if rng.random() < 0.5:
        return _problem(f"{a}+{b}=", _decimal_text(a + b))
    return _problem(f"{a}-{b}=", _decimal_text(a - b))


def order_of_operations(rng: random.Random, level: int) -> Generated:
    hi = 9 * level + 1
    a, b, c = (rng.randint(0, hi) for _ in range(3))
    form = rng.randrange(3)
    if form == 0:
        return _problem(f"{a}+{b}*{c}=", str(a + b * c))
    if form == 1:
        return _problem(f"{a}*{b}-{c}=", str(a * b - c))
    return _problem(f"({a}+{b})*{c}=", str((a + b) * c))


def _coprime_pair(rng: random.Random, level: int) -> tuple[int, int, int]:
    common = rng.randint(1, 4 * level + 2)
    x, y = rng.randint(1, 5 * level + 5), rng.randint(1, 5 * level + 5)
    return common, x, y


def gcd(rng: random.Random, level: int) -> Generated:
    common, x, y = _coprime_pair(rng, level)
    a, b = common * x, common * y
    return _problem(f"gcd({a},{b})=", str(math.gcd(a, b)))


def lcm(rng: random.Random, level: int) -> Generated:
    common, x, y = _coprime_pair(rng, level)
    a, b = common * x, common * y
    return _problem(f"lcm({a},{b})=", str(a * b // math.gcd(a, b)))


def modulo(rng: random.Random, level: int) -> Generated:
    b = rng.randint(2, 5 * level + 5)
    a = rng.randint(0, 10 ** (level + 1))
    return _problem(f"{a} mod {b}=", str(a % b))


def fraction(rng: random.Random, level: int) -> Generated:
    hi = 3 * level + 3
    p, r = rng.randint(1, hi), rng.randint(1, hi)
    q, s = rng.randint(2, hi + 1), rng.randint(2, hi + 1)
    op = rng.choice("+-*")
    x, y = Fraction(p, q), Fraction(r, s)
    value = x + y if op == "+" else x - y if op == "-" else x * y
    return _problem(f"{p}/{q}{op}{r}/{s}=", _frac_text(value))


def linear_equation(rng: random.Random, level: int) -> Generated:
    """a*x+b=c. Integer solutions at level 2; from level 3 on the solution may be a fraction."""
    hi = 3 * level + 3
    a = rng.choice([k for k in range(-hi, hi + 1) if k != 0])
    b = rng.randint(-hi * 3, hi * 3)
    if level >= 3 and rng.random() < 0.5:
        c = rng.randint(-hi * 5, hi * 5)
        x = Fraction(c - b, a)
    else:
        x = Fraction(rng.randint(-hi, hi))
        c = int(a * x + b)
    coefficient = {1: "", -1: "-"}.get(a, str(a))
    lhs = f"{coefficient}x{b:+d}" if b else f"{coefficient}x"
    return _problem(f"{lhs}={c}, x=", _frac_text(x))


def square_root(rng: random.Random, level: int) -> Generated:
    root = rng.randint(0, 10 * level + 5)
    return _problem(f"sqrt({root * root})=", str(root))


def power(rng: random.Random, level: int) -> Generated:
    base = rng.randint(2, level + 3)
    exponent = rng.randint(2, level + 4)
    return _problem(f"{base}^{exponent}=", str(base**exponent))


# ----------------------------------------------------------------------------- stated in words (level 4)
# One operation stated in English on small operands: the form SmolLM2-135M-Instruct answers at all
# (docs/results.md, "Real models"), where `52+33=` gets rambling. A level of its own, so
# levels 0-3 draw exactly as before; `generate(..., families=[...])` draws these alone.
_ONES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
         "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
WORDS_LEVEL = 4
WORDS_MAX = 12  # operands: with two-digit ones (`sixty-one plus thirty-eight`) it was right 5 of 96 times


def number_words(n: int) -> str:
    """0-999 in English words: 52 -> `fifty-two`, 305 -> `three hundred five`."""
    if not 0 <= n <= 999:
        raise ValueError(f"number_words takes 0-999, got {n}")
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else "-" + _ONES[n % 10])
    rest = n % 100
    return f"{_ONES[n // 100]} hundred" + ("" if rest == 0 else " " + number_words(rest))


def arithmetic_words(rng: random.Random, level: int) -> Generated:
    """`What is seven plus five?`: +, - (never below zero) or x on operands up to `WORDS_MAX`."""
    op = rng.choice(("plus", "minus", "times"))
    a, b = rng.randint(1, WORDS_MAX), rng.randint(1, WORDS_MAX)
    a, b = (a, b) if op != "minus" or a >= b else (b, a)
    value = a + b if op == "plus" else a - b if op == "minus" else a * b
    return _problem(f"What is {number_words(a)} {op} {number_words(b)}?", str(value))


_STORY = (  # (a story with one operation, how the answer is computed)
    ("{name} has {a} apples and buys {b} more. How many apples does {name} have now?", "+"),
    ("{name} had {a} stickers and gave {b} of them away. How many stickers does {name} have left?", "-"),
    ("A box holds {a} pencils. How many pencils are in {b} boxes?", "*"),
    ("{name} reads {a} pages on Monday and {b} pages on Tuesday. How many pages is that in total?", "+"),
    ("A bus has {a} people on it. At the stop, {b} people get off. How many people are still on the bus?", "-"),
)
_NAMES = ("Sam", "Ana", "Tom", "Mia", "Leo", "Eva", "Ben", "Zoe")


def word_problem(rng: random.Random, level: int) -> Generated:
    """A one-sentence story with one operation on numbers up to `WORDS_MAX`."""
    story, op = rng.choice(_STORY)
    a, b = rng.randint(2, WORDS_MAX), rng.randint(1, WORDS_MAX)
    a, b = (a, b) if op != "-" or a >= b else (b, a)
    value = a + b if op == "+" else a - b if op == "-" else a * b
    return _problem(story.format(name=rng.choice(_NAMES), a=a, b=b), str(value))


# name -> (min_level, make). Order is part of determinism: do not reorder, only append.
MATH_FAMILIES = {
    "add": (0, add),
    "sub": (0, sub),
    "mul": (1, mul),
    "decimal": (1, decimal),
    "order_of_operations": (1, order_of_operations),
    "gcd": (1, gcd),
    "lcm": (1, lcm),
    "modulo": (1, modulo),
    "fraction": (2, fraction),
    "linear_equation": (2, linear_equation),
    "square_root": (2, square_root),
    "power": (3, power),
    "arithmetic_words": (WORDS_LEVEL, arithmetic_words),
    "word_problem": (WORDS_LEVEL, word_problem),
}
