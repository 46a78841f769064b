"""Unboxed final-answer forms and the strict `answer_format="boxed"` setting (verifiers/math/extract.py,
verifiers/math/extract_phrases.py). Each form: found when written, and a right extraction of a wrong answer
stays that wrong answer (never a number found elsewhere in the text)."""

from __future__ import annotations

import pytest
from scalerl.verifiers.math.extract import extract_answer


def answer(text: str, **kw) -> str:
    found = extract_answer(text, **kw)
    return found.answer if found.kind == "answer" else found.kind


@pytest.mark.parametrize("text,expected", [
    ("The GCF is 12, add 11.\n\n# Answer\n\n23", "23"),
    ("We get 12 + 11 = 23.\n\n# Answer\n\n22", "22"),  # right extraction, wrong answer
    ("The answer is $\\frac{1}{2}$.", "\\frac{1}{2}"),
    ("So the answer is 7, not 5.", "7"),
    ("Final Answer: The final answer is $24$. I hope it is correct.", "24"),
    ("Total 18 dollars.\n#### 18", "18"),
    ("Total 18 dollars.\n#### 19", "19"),
    ("work, with 3 and 4\n\n$$x^5 - 1$$", "x^5 - 1"),
    ("work, with 3 and 4\n\n42", "42"),
    ("**Final Answer**\n\n$23$", "23"),
    ("Answer: $x^5 - x^4 + 1$", "x^5 - x^4 + 1"),
    ("The answer is $\\$18$.", "\\$18"),
    ("# Answer\n\n10,\\!080", "10,\\!080"),
])
def test_each_form_finds_what_the_model_said(text, expected):
    assert answer(text) == expected


def test_prose_after_final_answer_is_never_the_answer():
    text = "The GCF is 12. To find the final answer, I need to increase the GCF by 11."
    assert answer(text) == "no_answer"
    assert answer(text + "\n\n# Answer\n\n23") == "23"
    assert answer("The answer is that we need more cases.") == "no_answer"


@pytest.mark.parametrize("text,expected", [
    ("So $\\theta$ equals -$\\pi/6$.", "-\\pi/6"),
    ("The answer is -$3$.", "-3"),
    ("The answer is $50$%.", "50\\%"),
    ("So the discount is $50$%.", "50\\%"),
    ("The answer is $30$ degrees.", "30^\\circ"),
    ("The answer is $5$ cm.", "5\\text{ cm}"),
])
def test_sign_and_unit_outside_the_delimiters_stay(text, expected):
    assert answer(text) == expected


def test_a_minus_outside_turns_a_matching_number_wrong():
    from scalerl.verifiers.math.judge import judge

    assert judge("\\frac{\\pi}{6}", answer("so it is -$\\frac{\\pi}{6}$.")).status == "wrong"


@pytest.mark.parametrize("text,expected", [
    ("(B) $2\\sqrt{2}$", "(B) 2\\sqrt{2}"), ("w=16, d=3", "w=16, d=3"), ("B", "B"), ("x < 3", "x < 3"),
])
def test_a_bare_one_line_answer_is_the_answer(text, expected):
    assert answer(text) == expected


def test_a_bare_line_of_words_is_not_an_answer():
    assert answer("nothing here") == answer("The car stopped.") == "no_answer"
    assert answer("The answer is stopped.") == "stopped"  # words after a marker are


def test_boxed_format_makes_a_missing_box_a_format_failure():
    for text in ("The answer is 42.", "# Answer\n\n42", "#### 42", "work\n\n$42$", "42"):
        assert answer(text) != "no_answer"
        assert answer(text, answer_format="boxed") == "no_answer"
    assert answer("so \\boxed{41} and the answer is 42", answer_format="boxed") == "41"
    assert answer("\\fbox{7}", answer_format="boxed") == "7"


def test_a_marked_answer_after_the_last_box_is_the_later_statement():
    two_boxes = "So the roots are $\\boxed{2}$ and $\\boxed{3}$.\n\n# Answer\n\n2, 3"
    assert answer(two_boxes) == "2, 3"
    assert extract_answer(two_boxes).method == "phrase"
    assert answer("so \\boxed{41}, and the answer is $42$.") == "42"  # right extraction, wrong answer
    assert answer("so \\boxed{41}, and the answer is $42$.", answer_format="boxed") == "41"


def test_words_or_the_same_answer_after_a_box_leave_the_box():
    assert answer("\\boxed{12}. Note the answer is positive.") == "12"
    assert answer("\\boxed{7} since the answer is that we need more cases") == "7"
    same = extract_answer("\\boxed{3}.\n\n# Answer\n\n3")
    assert (same.answer, same.method) == ("3", "boxed")
    assert answer("The answer is \\boxed{5}.") == "5"
    check = "So $17^{-1}\\equiv \\boxed{44}$.\n\nWe may check our answer: $17\\cdot 44 = 748 \\equiv 1$."
    assert answer(check) == "44"  # a bare "answer:" in prose after the box is not a final answer
    assert answer(check.replace("We may check our answer:", "The answer is")) != "44"


def test_both_roots_under_answer_after_two_boxes_match_a_plus_minus_reference():
    from scalerl.verifiers.math.judge import judge

    text = ("So the two solutions are $\\boxed{2\\sqrt{2} + 3}$ and $\\boxed{3 - 2\\sqrt{2}}$.\n\n"
            "# Answer\n\n3 - 2\\sqrt{2}, 2\\sqrt{2} + 3")
    assert judge("3 \\pm 2 \\sqrt{2}", answer(text)).status == "correct"
    one_root = text.rsplit("\n", 1)[0] + "\n3 + 2\\sqrt{2}"
    assert judge("3 \\pm 2 \\sqrt{2}", answer(one_root)).status == "wrong"
