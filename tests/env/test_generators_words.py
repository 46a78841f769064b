"""The generator's tasks stated in words (level 4: `arithmetic_words`, `word_problem`, `function_words`):
gold completions score `correct` with the real verifiers, `families=` draws them alone, and levels 0-3
draw from the families they always had."""

from __future__ import annotations

import hashlib
import re

import pytest
from scalerl.env.contracts.records import VerifyItem
from scalerl.env.sources.generators import families_at, generate
from scalerl.env.sources.generators.code_tasks import tells_apart
from scalerl.env.sources.generators.math_tasks import number_words
from scalerl.env.sources.prepare import check_records
from scalerl.verifiers import verify_batch

MATH_WORDS = ["arithmetic_words", "word_problem"]


def test_number_words():
    assert [number_words(n) for n in (0, 13, 20, 52, 90, 100, 305, 999)] == [
        "zero", "thirteen", "twenty", "fifty-two", "ninety", "one hundred", "three hundred five",
        "nine hundred ninety-nine"]
    with pytest.raises(ValueError):
        number_words(1000)


def test_gold_answers_and_programs_are_correct():
    records = [r for seed in range(3) for r in generate("math", seed=seed, count=200, level=4, families=MATH_WORDS)]
    records += [r for seed in range(3) for r in generate("code", seed=seed, count=60, level=4,
                                                          families=["function_words"])]
    report = check_records(records)
    assert report.checked == len(records) and report.failures == [], report.failures[:5]


def test_families_draws_only_the_named_ones_and_refuses_others():
    math = generate("math", seed=0, count=300, level=4, families=MATH_WORDS)
    assert {r.metadata["task"] for r in math} == set(MATH_WORDS)
    assert all(r.prompt[0].content.startswith(("What is ", *"ABCDEFGHIJKLMNOPQRSTUVWXYZ")) for r in math)
    code = generate("code", seed=0, count=100, level=4, families=["function_words"])
    assert all(r.prompt[0].content.startswith("Write a Python function ") for r in code)
    assert len({r.prompt_id for r in generate("code", seed=0, count=3000, level=4, families=["function_words"])}) > 200
    with pytest.raises(ValueError, match="not math families at level 1"):
        generate("math", seed=0, count=1, level=1, families=["word_problem"])
    with pytest.raises(ValueError, match="not code families"):
        generate("code", seed=0, count=1, level=4, families=["nope"])


def test_levels_below_4_draw_the_families_they_always_had():
    assert {f.name for f in families_at("math", 3)} == {
        "add", "sub", "mul", "decimal", "order_of_operations", "gcd", "lcm", "modulo", "fraction",
        "linear_equation", "square_root", "power"}
    assert {f.name for f in families_at("code", 3)} == {
        "linear_function", "quadratic_function", "string_function", "list_function", "stdio_numbers", "stdio_words"}
    digest = hashlib.sha256()
    for domain in ("math", "code", "if"):
        for level in range(4):
            for r in generate(domain, seed=3, count=30, level=level):
                digest.update(r.prompt_id.encode())
    assert digest.hexdigest()[:16] == "bab1323e90b4c14c"  # the same prompts as before the level-4 families


def test_function_words_cases_fail_the_identity_and_every_constant():
    """A task whose four cases a trivial program passes rewards gaming (`replace q by g` on strings without
    a q: `return s` passed); every case set must fail the identity and all constants."""
    records = [r for seed in range(3)
               for r in generate("code", seed=seed, count=400, level=4, families=["function_words"])]
    for r in records:
        inputs, outputs = [c.args[0] for c in r.tests.cases], [c.expected for c in r.tests.cases]
        assert len({repr(y) for y in outputs}) > 1, r.prompt[0].content
        if all(type(y) is type(x) for x, y in zip(inputs, outputs)):
            assert 2 * sum(y != x for x, y in zip(inputs, outputs)) >= len(inputs), r.prompt[0].content
    same_letter = re.compile(r"every letter (\w) replaced by the letter \1\.")  # the identity
    assert not any(same_letter.search(r.prompt[0].content) for r in records)


def test_function_words_trivial_programs_score_wrong_with_the_real_verifier():
    records = [r for r in generate("code", seed=0, count=400, level=4, families=["function_words"])
               if "replaced by the letter" in r.prompt[0].content or "appears in the string" in r.prompt[0].content]
    assert len(records) >= 5
    items = [VerifyItem(id=str(i), domain="code", completion=f"```python\ndef g(s):\n    return {body}\n```",
                        tests=r.tests) for i, r in enumerate(records[:5]) for body in ("s", "0")]
    assert [v.status for v in verify_batch(items)] == ["wrong"] * len(items)


def test_telling_inputs_keep_the_first_draws_of_the_callers_generator():
    """Redrawn cases come from a generator seeded by the prompt: the task stream (prompt ids) is the one
    drawn before the cases were checked, so runs and held-out splits keep their prompts."""
    digest = hashlib.sha256()
    for seed in range(3):
        for r in generate("code", seed=seed, count=60, level=4, families=["function_words"]):
            digest.update(r.prompt_id.encode())
    assert digest.hexdigest()[:16] == "bf4cb5f2febdfb0a"
    assert tells_apart(["ab", "cd"], str.upper) and not tells_apart(["ab", "cd"], lambda s: s.replace("q", "g"))
    assert not tells_apart(["ab", "cd"], len) and tells_apart(["ab", "cde"], len)
