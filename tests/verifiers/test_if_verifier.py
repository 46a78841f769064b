"""The `if` domain's references (RLVR and IFEval forms) and verdicts, through the real batch API."""

from __future__ import annotations

import json
import sys

import pytest
from pydantic import ValidationError
from scalerl.env.contracts.records import RewardTable, VerifyItem
from scalerl.verifiers import VerifierPool
from scalerl.verifiers.ifeval.reference import RLVR_FUNCTIONS, canonical, claims, parse_reference
from scalerl.verifiers.ifeval.verifier import IfBatchVerifier, response_text
from scalerl.verifiers.verifier_config import IfConfig, VerifierConfig

PAD = {k: None for k in ("N", "quantifier", "end_phrase", "keyword_list", "word", "forbidden_words", "letter", "i",
                         "first_word", "postscript_marker", "options", "section_splitter", "original_prompt")}


def rlvr(func: str, **args) -> str:
    """A `ground_truth` as allenai/RLVR-IFeval writes it: every argument key present, unused ones null."""
    return json.dumps({"func_name": func, **PAD, **args})


# RLVR function, its arguments, a response that follows it, one that does not
RLVR_CASES = [
    ("verify_keywords", {"keyword_list": ["moon", "tide"]}, "The moon pulls the tide.", "The moon."),
    ("verify_keyword_frequency", {"word": "sea", "N": 2}, "sea and sea", "sea, sea and sea"),
    ("validate_forbidden_words", {"forbidden_words": ["ocean"]}, "The sea.", "The Ocean."),
    ("verify_letter_frequency", {"letter": "q", "N": 1}, "a quiet day", "quick quiet"),
    ("verify_paragraph_count", {"N": 2}, "One.\n* * *\nTwo.", "One."),
    ("validate_word_constraint", {"N": 3, "quantifier": "at most"}, "one two", "one two three four"),
    ("verify_sentence_constraint", {"N": 2, "quantifier": "around"}, "Go. Run. Hop.",
     "Go. Run. Hop. Sit. Nap."),
    ("validate_paragraphs", {"N": 2, "i": 2, "first_word": "then"}, "First.\n\nThen more.", "First.\n\nNow."),
    ("verify_postscript", {"postscript_marker": "P.S."}, "Hi.\nP.S. bye", "Hi."),
    ("validate_placeholders", {"N": 1}, "Hi [name]", "Hi you"),
    ("verify_bullet_points", {"N": 2}, "* a\n* b", "* a"),
    ("validate_title", {}, "<<T>>\nbody", "body"),
    ("validate_choice", {"options": "('My answer is yes.', 'My answer is no.')"}, "My answer is no.", "Nope."),
    ("validate_highlighted_sections", {"N": 1}, "*key* point", "plain"),
    ("validate_sections", {"N": 2, "section_splitter": "Chapter"}, "Chapter 1 a Chapter 2 b", "Chapter 1 a"),
    ("validate_json_format", {}, "[1, 2]", "[1, 2"),
    ("validate_repeat_prompt", {"original_prompt": "Name a fruit."}, "Name a fruit. Apple.", "Apple."),
    ("validate_two_responses", {}, "A\n******\nB", "A"),
    ("validate_uppercase", {}, "LOUD", "Loud"),
    ("validate_lowercase", {}, "quiet", "Quiet"),
    ("validate_frequency_capital_words", {"N": 2, "quantifier": "at least"}, "NO WAY", "No way"),
    ("validate_end", {"end_phrase": "Is there anything else I can help with?"},
     "Done. Is there anything else I can help with?", "Is there anything else I can help with? Done."),
    ("validate_quotation", {}, "\"quoted\"", "quoted"),
    ("validate_no_commas", {}, "no commas here", "one, two"),
]


@pytest.fixture(scope="module")
def pool():
    with VerifierPool(VerifierConfig(math={"workers": 1})) as p:
        yield p


def _items(reference: str, *completions: str) -> list[dict]:
    return [{"id": str(i), "domain": "if", "completion": c, "answer": reference} for i, c in enumerate(completions)]


@pytest.mark.parametrize("func,args,good,bad", RLVR_CASES, ids=[c[0] for c in RLVR_CASES])
def test_every_rlvr_function_is_scored(pool, func, args, good, bad):
    good_v, bad_v = pool.verify_batch(_items(rlvr(func, **args), good, bad))
    assert (good_v.status.value, good_v.reward) == ("correct", 1.0), good_v.details
    assert (bad_v.status.value, bad_v.reward) == ("wrong", 0.0), bad_v.details
    assert bad_v.details["failed"] == [RLVR_FUNCTIONS[func][0]]


def test_every_rlvr_function_has_a_case():
    assert {c[0] for c in RLVR_CASES} | {"validate_response_language"} == set(RLVR_FUNCTIONS)


def test_ifeval_form_with_several_constraints_names_the_failed_ones(pool):
    ref = json.dumps({"instruction_id_list": ["punctuation:no_comma", "change_case:english_lowercase",
                                              "startend:end_checker"],
                      "kwargs": [{}, {"num_words": None}, {"end_phrase": "bye"}]})
    ok, two_bad = pool.verify_batch(_items(ref, "hello bye", "Hello, bye"))
    assert ok.status.value == "correct" and ok.details["followed"] == 3
    assert two_bad.status.value == "wrong"
    assert two_bad.details["failed"] == ["punctuation:no_comma", "change_case:english_lowercase"]
    assert (two_bad.details["followed"], two_bad.details["total"]) == (1, 3)


def test_ifevalg_list_form_and_canonical_agree():
    ref = json.dumps([{"instruction_id": ["punctuation:no_comma"], "kwargs": [None]}])
    assert parse_reference(ref) == (("punctuation:no_comma", {}),)
    assert json.loads(canonical(rlvr("validate_word_constraint", N=5, quantifier="at least"))) == {
        "instruction_id_list": ["length_constraints:number_words"],
        "kwargs": [{"num_words": 5, "relation": "at least"}]}


@pytest.mark.parametrize("reference,message", [
    ("not json", "JSON"),
    (json.dumps({"func_name": "validate_colour"}), "validate_colour"),
    (rlvr("verify_bullet_points"), "num_bullets"),
    (rlvr("validate_no_commas", N=3), "'N'"),
    (json.dumps({"instruction_id_list": ["a:b"], "kwargs": [{}]}), "unknown constraint"),
    (json.dumps({"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}, {}]}), "kwargs"),
    (json.dumps([]), "no constraint"),
])
def test_a_reference_the_verifier_cannot_score_is_refused_at_the_item(reference, message):
    with pytest.raises(ValidationError, match=message):
        VerifyItem(domain="if", completion="x", answer=reference)
    assert not claims(reference)


def test_a_bare_if_reference_is_claimed_and_a_math_answer_is_not():
    assert claims(rlvr("validate_title")) and not claims("42") and not claims("[1, 2]")


def test_loose_mode_and_fraction_reward_from_the_verifier_section():
    ref = json.dumps({"instruction_id_list": ["startend:end_checker", "punctuation:no_comma"],
                      "kwargs": [{"end_phrase": "Any other questions?"}, {}]})
    items = [VerifyItem(domain="if", completion=c, answer=ref) for c in
             ("Done. **Any other questions?**", "Done, ok. **Any other questions?**")]
    config = VerifierConfig.model_validate({"if": {"mode": "loose", "reward": "fraction"},
                                            "rewards": {"wrong": -1.0}, "math": {"workers": 1}})
    with VerifierPool(config) as loose_pool:
        rescued, half = loose_pool.verify_batch(items)
    assert rescued.status.value == "correct" and rescued.details["strict"] is False and rescued.details["loose"]
    assert half.status.value == "wrong" and half.reward == pytest.approx(0.0)  # halfway between -1 and 1
    assert half.details["failed"] == ["punctuation:no_comma"]


def test_statuses_of_empty_long_and_reasoning_completions():
    verifier = IfBatchVerifier(IfConfig(max_completion_chars=50), RewardTable())
    ref = rlvr("validate_lowercase")
    assert verifier.score("<think>I Think</think>   ", ref).status.value == "no_answer"
    assert verifier.score("x" * 51, ref).status.value == "unparsable"
    assert verifier.score("<think>Plan It</think>all lowercase", ref).status.value == "correct"
    assert response_text("a</think>b</think>c", ["</think>"]) == "c"
    unchecked = verifier.score("fine", "not json")  # an item built without validation
    assert unchecked.status.value == "error" and "JSON" in unchecked.details["reason"]


def test_the_language_check_is_scored_and_an_error_verdict_without_langdetect(pool, monkeypatch):
    ref = rlvr("validate_response_language", language="de")
    good, bad = pool.verify_batch(_items(ref, "Guten Tag, wie geht es Ihnen heute an diesem schönen Morgen?",
                                         "Good morning, how are you today on this fine day?"))
    assert (good.status.value, bad.status.value) == ("correct", "wrong")
    monkeypatch.setitem(sys.modules, "langdetect", None)  # as where it is not installed: import fails
    verdict = IfBatchVerifier(IfConfig(), RewardTable()).score("Guten Tag", ref)
    assert verdict.status.value == "error" and "langdetect" in verdict.details["reason"]


def test_unknown_verifier_setting_is_refused():
    with pytest.raises(ValidationError, match="colour"):
        VerifierConfig.model_validate({"if": {"colour": "red"}})
