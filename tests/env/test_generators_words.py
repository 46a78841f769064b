"""The generator's tasks stated in words (level 4: `arithmetic_words`, `word_problem`, `function_words`):
gold completions score `correct` with the real verifiers, `families=` draws them alone, and levels 0-3
draw from the families they always had."""

from __future__ import annotations

import hashlib

import pytest
from scalerl.env.sources.generators import families_at, generate
from scalerl.env.sources.generators.math_tasks import number_words
from scalerl.env.sources.prepare import check_records

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
