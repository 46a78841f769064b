"""Answer forms the question states (verifiers/math/question.py), both ways per rule: the required
form is accepted, the forbidden form of the same value rejected and the rule named; a question that
states no form changes nothing; no MATH-500 reference and no human-graded correct answer is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from scalerl.env.contracts.records import QUESTION_MAX_CHARS, VerifyItem
from scalerl.verifiers import VerifierPool
from scalerl.verifiers.math.extract import clean_answer
from scalerl.verifiers.math.question import check_forms, required_forms
from scalerl.verifiers.verifier_config import MathConfig, VerifierConfig

ROOT = Path(__file__).resolve().parents[2]
PLANE = ("Find the equation of the plane containing the points $(0,-1,-1),$ $(-4,4,4),$ and $(4,5,1).$  "
         "Enter your answer in the form\n\\[Ax + By + Cz + D = 0,\\]where $A,$ $B,$ $C,$ $D$ are integers "
         "such that $A > 0$ and $\\gcd(|A|,|B|,|C|,|D|) = 1.$")
MAP = ("If you know that the real life distance between two buildings on the map is $53.25$ miles, what would "
       "the distance between the buildings be (in inches) on the map, expressed as a fraction?")
LINE = 'lie on a line.  Enter the equation of this line in the form "$y = mx + b$".'

# (rule, question, reference, answers in the required form, answers in a forbidden form)
RULES = [
    ("fraction", "Express your answer as a common fraction.", "\\frac 59", ["\\dfrac{5}{9}", "5/9"],
     ["\\frac{2.5}{4.5}", "0.5555", "\\frac{1}{2}+\\frac{1}{18}"]),
    ("fraction", MAP, "\\frac{639}{40}", ["\\frac{639}{40}"], ["\\frac{31.95}{2}", "31.95/2", "15\\frac{39}{40}"]),
    ("fraction", "Answer as a fraction in lowest terms.", "\\frac 34", ["\\frac{3}{4}"], ["\\frac{6}{8}"]),
    ("fraction", "Express your answer as an improper fraction.", "\\frac{11}{2}", ["\\frac{11}{2}"],
     ["5\\frac{1}{2}", "5.5"]),
    ("fraction", "Express your answer as a common fraction in simplest radical form.", "\\frac{3\\sqrt{3}}{4}",
     ["\\frac{3\\sqrt3}{4}"], ["1.299"]),
    ("mixed", "Express your answer as a mixed number.", "1\\frac{4}{5}", ["1 \\tfrac{4}{5}", "1\\frac45"],
     ["\\frac{9}{5}", "1.8", "1\\frac{9}{5}"]),
    ("decimal", "Express your answer as a decimal to the nearest hundredth.", "1.25", ["1.25"],
     ["\\frac{5}{4}", "1.250", "\\frac54"]),
    ("decimal", "Write $\\frac{3}{20}$ as a decimal.", "0.15", [".15", "0.15"], ["\\frac{3}{20}", "15\\%"]),
    ("precision", "Round your answer to the nearest tenth of a cent.", "5.4 \\text{ cents}",
     ["5.4", "\\frac{27}{5}"], ["5.41", "5.412 \\text{ cents}"]),
    ("precision", "Express your answer to the nearest whole number.", "\\$32,\\!348", ["32348", "\\$32,348"],
     ["32348.0", "32347.9"]),
    ("radical", "Express your answer in simplest radical form.", "2\\sqrt{5}", ["2\\sqrt5", "2 \\sqrt{5}"],
     ["\\sqrt{20}", "\\frac{10}{\\sqrt{5}}", "4.472", "\\sqrt{\\frac{40}{2}}"]),
    ("pi", "What is the area of the circle? Express your answer in terms of $\\pi$.", "16\\pi", ["16 \\pi"],
     ["50.27", "50.265"]),
    ("interval", "Express your answer in interval notation.", "(-\\infty,-5)", ["(-\\infty, -5)"],
     ["k < -5", "x \\le -5", "x=-5"]),
    ("equation", LINE, "y = -2x", ["y=-2x", "y = -2 x"], ["-2x", "2x + y = 0", "y = -2x + 0y"]),
    ("linear", PLANE, "5x - 7y + 11z + 4 = 0", ["5x-7y+11z+4=0", "5x - 7y + 11z = -4"],
     ["-5x+7y-11z-4=0", "10x-14y+22z+8=0", "5x-7y+11z+4.0=0", "x - 1.4y + 2.2z + 0.8 = 0"]),
]
CASES = [(rule, q, g, a, True) for rule, q, g, right, _ in RULES for a in right]
CASES += [(rule, q, g, a, False) for rule, q, g, _, wrong in RULES for a in wrong]


@pytest.mark.parametrize("rule,question,gold,answer,allowed", CASES)
def test_each_rule_accepts_the_required_form_and_rejects_the_forbidden_one(rule, question, gold, answer, allowed):
    outcome = check_forms(question, gold, answer)
    assert outcome is not None and not outcome.skipped
    if allowed:
        assert outcome.rejected_by is None and rule in outcome.checked, outcome
    else:
        assert outcome.rejected_by == rule and outcome.reason.startswith("the question asks for"), outcome


@pytest.mark.parametrize("question", [
    "What is $2+2$?", "",
    # forms stated for an intermediate quantity, not the answer
    "The equation of the line can be expressed in the form $y = mx + b.$  Enter the ordered pair $(m,b).$",
    "If $0.\\overline{1331}$ is written as a fraction $\\frac{a}{b}$ with $a$ and $b$ coprime, what is $a+b$?",
    "The number can be written in the form $a\\sqrt{2} + b\\sqrt{3}$. What is $a+b$?",
    "When converting $\\frac{31}{11111}$ to a decimal, the decimal repeats. How many digits repeat?",
])
def test_a_question_without_a_stated_answer_form_changes_nothing(question):
    assert required_forms(question) == ()
    assert check_forms(question, "5", "5.0") is None


def test_a_rule_the_reference_does_not_meet_is_skipped_not_applied():
    outcome = check_forms("Express your answer as a common fraction.", "0.5", "0.5")
    assert (outcome.rejected_by, outcome.skipped) == (None, ("fraction",))


def test_every_math500_reference_meets_the_forms_its_question_states():
    rows = [json.loads(line) for line in (ROOT / "datasets/reference/math500/test.jsonl").open()]
    stated = [r for r in rows if required_forms(r["problem"])]
    assert len(stated) >= 40  # fractions, decimals, radicals, intervals, mixed numbers, equations, planes
    names = {rule.name for r in stated for rule in required_forms(r["problem"])}
    assert names >= {"fraction", "mixed", "decimal", "precision", "radical", "interval", "equation", "linear"}
    for r in stated:
        gold = clean_answer(r["answer"])
        outcome = check_forms(r["problem"], gold, gold)
        assert (outcome.rejected_by, outcome.skipped) == (None, ()), (r["unique_id"], gold, outcome)


def test_human_graded_answers_correct_ones_kept_and_the_forbidden_forms_refused():
    rows = [json.loads(line) for line in (ROOT / "datasets/accuracy/math_real/items.jsonl").open()]
    refused = {}
    for r in rows:
        if r["form"] == "bare" and r["label"] in ("correct", "wrong"):
            outcome = check_forms(r["problem"], clean_answer(r["answer"]), clean_answer(r["output"]))
            if outcome is not None and outcome.rejected_by:
                refused[r["output"]] = (r["label"], outcome.rejected_by)
    assert all(label == "wrong" for label, _ in refused.values()), refused
    assert refused["-5x+7y-11z-4=0"][1] == "linear" and refused["-2x"][1] == "equation"
    assert refused["\\frac{31.95}{2}"][1] == refused["31.95/2"][1] == "fraction"


def test_question_is_bounded_and_the_field_is_named():
    with pytest.raises(ValidationError, match="question"):
        VerifyItem(domain="math", completion="1", answer="1", question="x" * (QUESTION_MAX_CHARS + 1))


@pytest.fixture(scope="module")
def pool():
    with VerifierPool(VerifierConfig(math=MathConfig(timeout_s=5.0))) as p:
        yield p


def item(i, completion, answer, question=None):
    return {"id": str(i), "domain": "math", "completion": completion, "answer": answer, "question": question}


# the labelled false positives of the real corpus, and a shape rule's acceptance the question forbids
FORBIDDEN = [("# Answer\n\n-5x+7y-11z-4=0", "5x - 7y + 11z + 4 = 0", PLANE, "form_linear"),
             ("# Answer\n\n\\frac{31.95}{2}", "\\frac{639}{40}", MAP, "form_fraction"),
             ("# Answer\n\n-2x", "y = -2x", LINE, "form_equation"),
             ("so $k < -5$.", "(-\\infty,-5)", "Express your answer in interval notation.", "form_interval")]


def test_verify_batch_refuses_a_forbidden_form_only_when_the_question_is_given(pool):
    without = pool.verify_batch([item(i, c, g) for i, (c, g, _, _) in enumerate(FORBIDDEN)])
    given = pool.verify_batch([item(i, c, g, q) for i, (c, g, q, _) in enumerate(FORBIDDEN)])
    assert [v.status.value for v in without] == ["correct"] * len(FORBIDDEN)  # the value is right
    assert [v.status.value for v in given] == ["wrong"] * len(FORBIDDEN)
    assert [v.details["rule"] for v in given] == [rule for *_, rule in FORBIDDEN]
    assert all(v.reward == 0.0 and v.details["value_rule"] == w.details["rule"] for v, w in zip(given, without))


def test_verify_batch_required_form_passes_and_copies_follow_their_own_question(pool):
    right = item("r", "\\boxed{5x-7y+11z+4=0}", "5x - 7y + 11z + 4 = 0", PLANE)
    plain = item("p", "\\boxed{5x-7y+11z+4=0}", "5x - 7y + 11z + 4 = 0", "What is the plane?")
    # the same (reference, answer) pair twice in one batch: one verdict computed, each item's question checked
    copies = [item("a", "\\boxed{0.5}", "\\frac12", "Express your answer as a common fraction."),
              item("b", "\\boxed{0.5}", "\\frac12")]
    v_right, v_plain, v_a, v_b = pool.verify_batch([right, plain, *copies])
    assert (v_right.status.value, v_right.details["forms"]) == ("correct", ["linear"])
    assert v_plain.status.value == "correct" and "forms" not in v_plain.details
    assert (v_a.status.value, v_a.details["rule"]) == ("wrong", "form_fraction")
    assert v_b.status.value == "correct" and v_b.details["rule"] == "fast_path"


def test_a_problem_record_sends_its_question_so_training_rewards_respect_the_form(pool):
    from scalerl.env.contracts.records import ProblemRecord

    prompt = [{"role": "system", "content": "Be brief."},
              {"role": "user", "content": "What is $1 \\div 2$? Express your answer as a common fraction.\n"
                                          "Please reason step by step, and put your final answer within \\boxed{}."}]
    record = ProblemRecord(prompt_id="p", domain="math", source="s", prompt=prompt, answer="\\frac{1}{2}")
    decimal, fraction = record.verify_item("\\boxed{0.5}", id="d"), record.verify_item("\\boxed{1/2}", id="f")
    assert decimal.question == prompt[1]["content"]
    assert record.verify_item("x", question=None).question is None  # a caller can leave it out
    v_decimal, v_fraction = pool.verify_batch([decimal, fraction])
    assert (v_decimal.status.value, v_decimal.details["rule"]) == ("wrong", "form_fraction")
    assert v_fraction.status.value == "correct"


@pytest.mark.parametrize("answer", ["\\sqrt{" + "9" * 990 + "}", "\\frac{" + "7" * 495 + "}{" + "3" * 495 + "}",
                                    "1" * 1000, "x" * 1000 + "=0", "\\frac{" * 300, "{" * 1000])
def test_hostile_answers_are_checked_without_raising(answer):
    questions = ["Express your answer in simplest radical form.", "Answer as a fraction in lowest terms.", PLANE,
                 LINE, "Express your answer as a mixed number.", "Express your answer as a decimal."]
    for question in questions:
        outcome = check_forms(question, answer, answer)
        assert outcome is not None and outcome.rejected_by is None  # the reference is the answer itself


def test_a_huge_radicand_is_still_tested_for_small_square_factors():
    radical = "Express your answer in simplest radical form."
    assert check_forms(radical, "2\\sqrt{2}", "\\sqrt{" + "9" * 990 + "}").rejected_by == "radical"  # 9 | 99...9
    assert check_forms(radical, "2\\sqrt{2}", "\\sqrt{" + "1" + "0" * 40 + "1}").rejected_by is None


def test_question_forms_off_lets_the_value_alone_decide():
    with VerifierPool(VerifierConfig(math=MathConfig(timeout_s=5.0, question_forms=False))) as off:
        verdicts = off.verify_batch([item(i, c, g, q) for i, (c, g, q, _) in enumerate(FORBIDDEN)])
    assert [v.status.value for v in verdicts] == ["correct"] * len(FORBIDDEN)
    assert not any(v.details["rule"].startswith("form_") for v in verdicts)
