"""Answer extraction: one property per test, adversarial where the input is hostile."""

from __future__ import annotations

import time

import pytest
from scalerl.verifiers.math.extract import extract_answer


def answer(text: str, **kw) -> str | None:
    found = extract_answer(text, **kw)
    return found.answer if found.kind == "answer" else found.kind


def test_last_boxed_wins():
    assert answer("first \\boxed{1}, then \\boxed{2}.") == "2"


def test_nested_braces_are_kept():
    assert answer("so $\\boxed{\\frac{\\sqrt{3}}{2}}$") == "\\frac{\\sqrt{3}}{2}"


def test_escaped_braces_do_not_close_the_box():
    assert answer("\\boxed{\\{1, 2\\}}") == "\\{1, 2\\}"


def test_fbox_and_space_forms():
    assert answer("\\fbox{7}") == "7"
    assert answer("thus $\\boxed 5$") == "5"
    assert answer("thus \\boxed {12}") == "12"


def test_unclosed_box_falls_back_to_an_earlier_one():
    assert answer("\\boxed{3} and later \\boxed{4") == "3"


def test_text_after_think_only():
    assert answer("<think>it is \\boxed{9}</think> so the answer is \\boxed{8}") == "8"


def test_answer_inside_unclosed_think_is_ignored():
    assert answer("<think>I guess \\boxed{9}") == "no_answer"


def test_think_answer_ignored_even_without_box_after():
    assert answer("<think>\\boxed{9}</think>The final answer is 42.") == "42"


@pytest.mark.parametrize("text,expected", [
    ("The final answer is 42.", "42"),
    ("Therefore the answer is $\\frac{1}{2}$.", "\\frac{1}{2}"),
    ("Answer: 3.5", "3.5"),
    ("so she makes 18 dollars.\n#### 2,125", "2,125"),
    ("We conclude that $x = 3$.", "x = 3"),
    ("hence \\(7\\)", "7"),
])
def test_fallbacks_users_expect(text, expected):
    assert answer(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "I don't know", "\\boxed{}", "\\boxed{", "<think></think>",
                                  "so $h=5$. The height of the cylinder is $"])
def test_nothing_found_is_no_answer(text):
    assert answer(text) == "no_answer"


def test_answer_over_cap_is_too_long():
    assert answer("\\boxed{" + "9" * 1001 + "}", max_answer_chars=1000) == "too_long"
    assert answer("\\boxed{" + "9" * 1000 + "}", max_answer_chars=1000) == "9" * 1000


def test_long_completion_keeps_its_tail():
    text = "\\boxed{1}" + "x" * 2000 + "\\boxed{2}"
    assert answer(text, max_completion_chars=100) == "2"
    assert answer("\\boxed{1}" + "x" * 2000, max_completion_chars=100) == "no_answer"


@pytest.mark.parametrize("text", [
    "x" * 1_000_000 + "\\boxed{5}",
    "\\boxed{" * 200_000,
    ("\\boxed{1" + "{" * 10) * 50_000,
    "The answer is " * 80_000,
    "$" * 1_000_000,
    "{" * 1_000_000 + "\\boxed{2}",
])
def test_megabyte_inputs_are_linear(text):
    start = time.perf_counter()
    extract_answer(text)
    assert time.perf_counter() - start < 2.0
