"""Code task families: function synthesis from input/output examples and small stdio programs.

Functional families show examples in the prompt and test on them plus hidden cases (a lookup table
of the shown values fails); the examples always determine the function among the family's
operations (checked at generation: examples that two operations agree on are redrawn). Stdio
families describe the task in one line and test on several inputs. The gold completion is a fenced
```python block that the sandbox scores `correct`.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
from typing import Any

from scalerl_env.records import FunctionalCase, FunctionalTests, StdioCase, StdioTests

from .types import Generated

MAX_REDRAWS = 50


def _fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def _call_text(name: str, arg: Any, result: Any) -> str:
    return f"{name}({json.dumps(arg)})={json.dumps(result)}"


def _functional(name: str, shown: list[Any], hidden: list[Any], fn: Callable, body: str,
                header: str) -> Generated:
    examples = " ".join(_call_text(name, x, fn(x)) for x in shown)
    arg = "x" if name == "f" else "s" if name == "g" else "xs"
    prompt = f"{header}{examples} {name}({arg})="
    cases = [FunctionalCase(args=[x], expected=fn(x)) for x in [*shown, *hidden]]
    code = f"def {name}({arg}):\n    return {body}"
    return Generated(prompt=prompt, solution=_fenced(code),
                     tests=FunctionalTests(entry_point=name, cases=cases))


# Level-0 linear coefficients: 9 × 61 = 549 distinct prompts, so a held-out share is hundreds of
# functions and a small model cannot pass it by memorizing the training ones. a stays one positive
# digit so the rule a = f(2) - f(1), b = f(1) - a is as learnable as level-0 subtraction.
LEVEL0_SLOPES = range(1, 10)
LEVEL0_INTERCEPTS = range(-30, 31)


def linear_function(rng: random.Random, level: int) -> Generated:
    """f(x)=a*x+b from three shown values; level 0 shows x=1,2,3 and hides one x in 4..9."""
    if level == 0:
        a, b = rng.choice(LEVEL0_SLOPES), rng.choice(LEVEL0_INTERCEPTS)
        shown, hidden = [1, 2, 3], [rng.randint(4, 9)]
    else:
        hi = 3 * level + 3
        a = rng.choice([k for k in range(-hi, hi + 1) if k != 0])
        b = rng.randint(-5 * level - 5, 5 * level + 5)
        xs = rng.sample(range(-5, 10 + 5 * level), 5)
        shown, hidden = sorted(xs[:3]), xs[3:]
    body = f"{a}*x{b:+d}" if b else f"{a}*x"
    header = "" if level == 0 else "Python function f from examples: "
    return _functional("f", shown, hidden, lambda x: a * x + b, body, header)


def quadratic_function(rng: random.Random, level: int) -> Generated:
    hi = level + 2
    a = rng.choice([k for k in range(-hi, hi + 1) if k != 0])
    b, c = rng.randint(-hi * 2, hi * 2), rng.randint(-hi * 3, hi * 3)
    xs = rng.sample(range(-6, 7 + 2 * level), 6)
    body = f"{a}*x*x{b:+d}*x{c:+d}"
    return _functional("f", sorted(xs[:4]), xs[4:], lambda x: a * x * x + b * x + c, body,
                       "Python function f from examples: ")


STRING_OPS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "reverse": ("s[::-1]", lambda s: s[::-1]),
    "upper": ("s.upper()", str.upper),
    "lower": ("s.lower()", str.lower),
    "swapcase": ("s.swapcase()", str.swapcase),
    "double": ("s+s", lambda s: s + s),
    "first_last": ("s[0]+s[-1]", lambda s: s[0] + s[-1]),
    "length": ("len(s)", len),
    "sorted": ("''.join(sorted(s))", lambda s: "".join(sorted(s))),
    "drop_first": ("s[1:]", lambda s: s[1:]),
    "count_upper": ("sum(c.isupper() for c in s)", lambda s: sum(c.isupper() for c in s)),
}

LIST_OPS: dict[str, tuple[str, Callable[[list[int]], Any]]] = {
    "sum_squares": ("sum(v*v for v in xs)", lambda xs: sum(v * v for v in xs)),
    "spread": ("max(xs)-min(xs)", lambda xs: max(xs) - min(xs)),
    "count_even": ("sum(v%2==0 for v in xs)", lambda xs: sum(v % 2 == 0 for v in xs)),
    "sorted_desc": ("sorted(xs, reverse=True)", lambda xs: sorted(xs, reverse=True)),
    "sum_positive": ("sum(v for v in xs if v>0)", lambda xs: sum(v for v in xs if v > 0)),
    "first_max_index": ("xs.index(max(xs))", lambda xs: xs.index(max(xs))),
    "cumulative": ("[sum(xs[:i+1]) for i in range(len(xs))]",
                   lambda xs: [sum(xs[: i + 1]) for i in range(len(xs))]),
}


def _by_examples(rng: random.Random, ops: dict, draw: Callable[[], Any], n_shown: int, n_hidden: int):
    """Pick an op and inputs whose shown outputs no other op reproduces."""
    name = rng.choice(sorted(ops))
    fn = ops[name][1]
    for _ in range(MAX_REDRAWS):
        inputs = [draw() for _ in range(n_shown + n_hidden)]
        shown = inputs[:n_shown]
        rivals = [o for o in ops if o != name and all(ops[o][1](x) == fn(x) for x in shown)]
        if not rivals:
            return name, shown, inputs[n_shown:]
    raise RuntimeError(f"could not draw distinguishing examples for {name}")  # pragma: no cover


def string_function(rng: random.Random, level: int) -> Generated:
    def draw() -> str:
        return "".join(rng.choice(string.ascii_letters) for _ in range(rng.randint(3, 4 + level)))

    name, shown, hidden = _by_examples(rng, STRING_OPS, draw, 2 + (level > 2), 2)
    body, fn = STRING_OPS[name]
    return _functional("g", shown, hidden, fn, body, "Python function g from examples: ")


def list_function(rng: random.Random, level: int) -> Generated:
    def draw() -> list[int]:
        return [rng.randint(-9 * level, 9 * level) for _ in range(rng.randint(2, 3 + level))]

    name, shown, hidden = _by_examples(rng, LIST_OPS, draw, 3, 2)
    body, fn = LIST_OPS[name]
    return _functional("h", shown, hidden, fn, body, "Python function h from examples: ")


STDIO_OPS: dict[str, tuple[str, str, Callable[[list[int]], str]]] = {
    "sum": ("their sum", "print(sum(v))", lambda v: str(sum(v))),
    "max": ("the largest", "print(max(v))", lambda v: str(max(v))),
    "min": ("the smallest", "print(min(v))", lambda v: str(min(v))),
    "sorted": ("them sorted ascending, space-separated", "print(*sorted(v))",
               lambda v: " ".join(map(str, sorted(v)))),
    "count_even": ("how many are even", "print(sum(x%2==0 for x in v))",
                   lambda v: str(sum(x % 2 == 0 for x in v))),
}


def stdio_numbers(rng: random.Random, level: int) -> Generated:
    name = rng.choice(sorted(STDIO_OPS))
    what, line, fn = STDIO_OPS[name]
    prompt = f"Python program: stdin has one line of integers; print {what}."
    cases = []
    for _ in range(4):
        values = [rng.randint(-10 * level, 10 * level) for _ in range(rng.randint(1, 4 + level))]
        cases.append(StdioCase(input=" ".join(map(str, values)) + "\n", output=fn(values) + "\n"))
    code = f"v = list(map(int, input().split()))\n{line}"
    return Generated(prompt=prompt, solution=_fenced(code), tests=StdioTests(cases=cases))


def stdio_words(rng: random.Random, level: int) -> Generated:
    """First line n, then n words: print them in reverse order, one per line."""
    prompt = ("Python program: stdin has n on the first line, then n words, one per line; "
              "print the words in reverse order, one per line.")
    cases = []
    for _ in range(3):
        words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 6)))
                 for _ in range(rng.randint(1, 3 + level))]
        cases.append(StdioCase(input=f"{len(words)}\n" + "".join(w + "\n" for w in words),
                               output="".join(w + "\n" for w in reversed(words))))
    code = "n = int(input())\nwords = [input() for _ in range(n)]\nprint(*reversed(words), sep='\\n')"
    return Generated(prompt=prompt, solution=_fenced(code), tests=StdioTests(cases=cases, compare="lines"))


# name -> (min_level, make). Order is part of determinism: do not reorder, only append.
CODE_FAMILIES = {
    "linear_function": (0, linear_function),
    "quadratic_function": (1, quadratic_function),
    "string_function": (1, string_function),
    "list_function": (2, list_function),
    "stdio_numbers": (2, stdio_numbers),
    "stdio_words": (3, stdio_words),
}
