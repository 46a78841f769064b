"""Code task families: function synthesis from input/output examples and small stdio programs.

Functional families show examples in the prompt and test on them plus hidden cases (a lookup table
of the shown values fails); the examples always determine the function among the family's
operations (checked at generation: examples that two operations agree on are redrawn). Stdio
families describe the task in one line and test on several inputs. The gold completion is a fenced
```python block that the sandbox scores `correct`; at level 0 (the built-in tiny model) it is one
unfenced line, `def g(s): return <body>`, at most 35 characters (the extractor runs a completion
without a fence as it is).
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
from typing import Any

from scalerl.env.contracts.records import FunctionalCase, FunctionalTests, StdioCase, StdioTests

from .types import Generated

MAX_REDRAWS = 50


def _fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def _call_text(name: str, arg: Any, result: Any) -> str:
    return f"{name}({json.dumps(arg)})={json.dumps(result)}"


def _functional(name: str, shown: list[Any], hidden: list[Any], fn: Callable, body: str,
                header: str, one_line: bool = False) -> Generated:
    examples = " ".join(_call_text(name, x, fn(x)) for x in shown)
    arg = "x" if name == "f" else "s" if name == "g" else "xs"
    prompt = f"{header}{examples} {name}({arg})="
    cases = [FunctionalCase(args=[x], expected=fn(x)) for x in [*shown, *hidden]]
    solution = (f"def {name}({arg}): return {body}" if one_line
                else _fenced(f"def {name}({arg}):\n    return {body}"))
    return Generated(prompt=prompt, solution=solution, tests=FunctionalTests(entry_point=name, cases=cases))


def linear_function(rng: random.Random, level: int) -> Generated:
    """f(x)=a*x+b from three shown values, checked on those and two hidden ones (level >= 1)."""
    hi = 3 * level + 3
    a = rng.choice([k for k in range(-hi, hi + 1) if k != 0])
    b = rng.randint(-5 * level - 5, 5 * level + 5)
    xs = rng.sample(range(-5, 10 + 5 * level), 5)
    shown, hidden = sorted(xs[:3]), xs[3:]
    body = f"{a}*x{b:+d}" if b else f"{a}*x"
    return _functional("f", shown, hidden, lambda x: a * x + b, body, "Python function f from examples: ")


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
# Level 0 (the built-in tiny model): operations whose one-line solution fits the CPU default's
# ~40-token answer budget. Recognizing the operation from two examples is pattern matching, which
# a ~1M-parameter character model learns and generalizes to unseen strings (arithmetic such as
# `a = f(2) - f(1)` it did not: held-out linear functions stayed at ~1 % pass rate).
LEVEL0_STRING_OPS = ("reverse", "upper", "lower", "swapcase", "double", "first_last", "length",
                     "sorted", "drop_first")

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
    """g(s) from shown examples; level 0 uses `LEVEL0_STRING_OPS`, no header and a one-line solution."""
    def draw() -> str:
        return "".join(rng.choice(string.ascii_letters) for _ in range(rng.randint(3, 4 + level)))

    ops = {k: STRING_OPS[k] for k in LEVEL0_STRING_OPS} if level == 0 else STRING_OPS
    name, shown, hidden = _by_examples(rng, ops, draw, 2 + (level > 2), 2)
    body, fn = ops[name]
    header = "" if level == 0 else "Python function g from examples: "
    return _functional("g", shown, hidden, fn, body, header, one_line=level == 0)


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


# ----------------------------------------------------------------------------- stated in words (level 4)
# The task in one English sentence instead of examples: the form SmolLM2-135M-Instruct solves (3 of 3 in
# docs/results.md, "Real models"), where from examples it copies the shown outputs. A level of its own, so
# levels 0-3 draw exactly as before; `generate(..., families=[...])` draws these alone. Operations with a
# drawn parameter (a count, a letter, a word) make ~250 distinct tasks (a held-out one differs from every
# trained one in its operation or parameter); each is checked on four random inputs the prompt never shows.
WORDS_LEVEL = 4
STRING_WORDS: dict[str, str] = {
    "reverse": "the string s reversed",
    "upper": "the string s in upper case",
    "lower": "the string s in lower case",
    "swapcase": "the string s with the case of every letter swapped",
    "double": "the string s written twice in a row",
    "first_last": "the first character of s followed by the last character of s",
    "length": "the number of characters in the string s",
    "sorted": "the characters of s sorted in ascending order, joined into one string",
    "drop_first": "the string s without its first character",
    "count_upper": "how many upper-case letters the string s contains",
}
LIST_WORDS: dict[str, str] = {
    "sum_squares": "the sum of the squares of the integers in the list xs",
    "spread": "the largest integer in the list xs minus the smallest",
    "count_even": "how many integers in the list xs are even",
    "sorted_desc": "the list xs sorted from largest to smallest, as a new list",
    "sum_positive": "the sum of the positive integers in the list xs",
    "first_max_index": "the index of the first occurrence of the largest integer in the list xs",
    "cumulative": "the list of running totals of xs (element i is the sum of xs[0] to xs[i])",
}
Task = tuple[str, str, Callable[[Any], Any]]  # (what it returns, in words; the gold body; the function)


def _string_task(rng: random.Random) -> Task:
    k, c, d = rng.randint(2, 4), rng.choice(string.ascii_lowercase), rng.choice(string.ascii_lowercase)
    if d == c:  # "replace c by c" would be the identity; the next letter, so no draw moves
        d = string.ascii_lowercase[(string.ascii_lowercase.index(c) + 1) % 26]
    w = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 4)))
    op = rng.randrange(len(STRING_WORDS) + 6)
    if op < len(STRING_WORDS):
        name = sorted(STRING_WORDS)[op]
        return STRING_WORDS[name], *STRING_OPS[name]
    return [
        (f"the first {k} characters of the string s", f"s[:{k}]", lambda s: s[:k]),
        (f"the last {k} characters of the string s", f"s[-{k}:]", lambda s: s[-k:]),
        (f"the string s repeated {k} times", f"s*{k}", lambda s: s * k),
        (f"the string s with every letter {c} replaced by the letter {d}", f"s.replace({c!r}, {d!r})",
         lambda s: s.replace(c, d)),
        (f"how many times the letter {c} appears in the string s", f"s.count({c!r})", lambda s: s.count(c)),
        (f"the string s followed by the word {w}", f"s+{w!r}", lambda s: s + w),
    ][op - len(STRING_WORDS)]


def _list_task(rng: random.Random) -> Task:
    k = rng.randint(2, 9)
    op = rng.randrange(len(LIST_WORDS) + 4)
    if op < len(LIST_WORDS):
        name = sorted(LIST_WORDS)[op]
        return LIST_WORDS[name], *LIST_OPS[name]
    return [
        (f"the list xs with every integer multiplied by {k}", f"[v*{k} for v in xs]", lambda xs: [v * k for v in xs]),
        (f"the list xs with {k} added to every integer", f"[v+{k} for v in xs]", lambda xs: [v + k for v in xs]),
        (f"the integers of the list xs that are greater than {k - 5}, in their order",
         f"[v for v in xs if v>{k - 5}]", lambda xs: [v for v in xs if v > k - 5]),
        (f"how many integers in the list xs are greater than {k - 5}", f"sum(v>{k - 5} for v in xs)",
         lambda xs: sum(v > k - 5 for v in xs)),
    ][op - len(LIST_WORDS)]


def _random_string(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_letters) for _ in range(rng.randint(2, 8)))


def _random_list(rng: random.Random) -> list[int]:
    return [rng.randint(-9, 9) for _ in range(rng.randint(1, 6))]


def tells_apart(inputs: list[Any], fn: Callable[[Any], Any]) -> bool:
    """Whether cases on `inputs` fail the trivial programs: the identity (at least half the outputs differ
    from their inputs, unless no output has the input's type) and every constant (not all outputs equal)."""
    outputs = [fn(x) for x in inputs]
    same_type = [type(y) is type(x) for x, y in zip(inputs, outputs)]
    changed = sum(y != x for x, y in zip(inputs, outputs))
    return len({repr(y) for y in outputs}) > 1 and (not any(same_type) or 2 * changed >= len(inputs))


def _telling_inputs(prompt: str, inputs: list[Any], draw: Callable[[random.Random], Any],
                    fn: Callable[[Any], Any]) -> list[Any]:
    """`inputs`, or, when they cannot tell the task from a trivial program (`replace q by g` on strings with
    no q: the identity passes), inputs drawn again until they can. The redraws come from a generator seeded
    by the prompt, so the caller's draws (and every later task's prompt) are those of the first draw."""
    local = random.Random(f"{prompt}|{inputs!r}")
    for _ in range(1000):
        if tells_apart(inputs, fn):
            return inputs
        inputs = [draw(local) for _ in inputs]
    raise RuntimeError(f"no telling inputs for {prompt!r}")  # every task in STRING/LIST tables has some


def function_words(rng: random.Random, level: int) -> Generated:
    """`Write a Python function g(s) that returns the string s in upper case.` (or h(xs) on a list), checked
    on four random inputs that tell it from the identity and from constants (`tells_apart`)."""
    if rng.random() < 0.5:
        name, arg, (what, body, fn) = "g", "s", _string_task(rng)
        draw: Callable[[random.Random], Any] = _random_string
    else:
        name, arg, (what, body, fn) = "h", "xs", _list_task(rng)
        draw = _random_list
    prompt = f"Write a Python function {name}({arg}) that returns {what}."
    inputs = _telling_inputs(prompt, [draw(rng) for _ in range(4)], draw, fn)
    cases = [FunctionalCase(args=[x], expected=fn(x)) for x in inputs]
    return Generated(prompt=prompt,
                     solution=_fenced(f"def {name}({arg}):\n    return {body}"),
                     tests=FunctionalTests(entry_point=name, cases=cases))


# name -> (min_level, make). Order is part of determinism: do not reorder, only append.
CODE_FAMILIES = {
    "linear_function": (1, linear_function),
    "quadratic_function": (1, quadratic_function),
    "string_function": (0, string_function),
    "list_function": (2, list_function),
    "stdio_numbers": (2, stdio_numbers),
    "stdio_words": (3, stdio_words),
    "function_words": (WORDS_LEVEL, function_words),
}
