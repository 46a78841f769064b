"""An instruction-following reference (the `answer` of an `if` item): which constraints, with which arguments.

The reference is a JSON string in one of the public forms, all read into one list of
(IFEval instruction id, validated arguments):
- RLVR (Tülu 3, allenai/RLVR-IFeval `ground_truth`): `{"func_name": "verify_keywords", "keyword_list":
  [...], "N": null, ...}`: one constraint function and its arguments, padded with nulls; a JSON list of
  such objects is several constraints.
- IFEval (google/IFEval, IFEval's input_data.jsonl): `{"instruction_id_list": [...], "kwargs": [{...}]}`.
- open-instruct's IFEvalG ground truth: `{"instruction_id": [...], "kwargs": [...]}`, or a list of them.

RLVR's function names map onto IFEval's ids with their arguments renamed (`N` → `num_words`, ...);
RLVR's exact counts (`verify_keyword_frequency`, `verify_letter_frequency`) become relation `exactly`
and its `quantifier` becomes the relation; RLVR counts keywords as whole words (`whole_words`) and divides
paragraphs with `* * *` (`divider`), as its own functions do. `parse_reference` is memoised (a group's items share one).

Guarantees: `parse_reference` returns a non-empty list or raises ValueError naming the constraint and
the argument at fault (the lists and argument dicts it returns are shared: read, never modify);
`canonical(...)` is the IFEval form of any accepted reference.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from scalerl.verifiers.ifeval.constraints import arguments

# RLVR function → (IFEval id, {RLVR argument: IFEval argument}, fixed IFEval arguments)
RLVR_FUNCTIONS: dict[str, tuple[str, dict[str, str], dict[str, Any]]] = {
    "verify_keywords": ("keywords:existence", {"keyword_list": "keywords"}, {}),
    "verify_keyword_frequency": ("keywords:frequency", {"word": "keyword", "N": "frequency"},
                                 {"relation": "exactly", "whole_words": True}),
    "validate_forbidden_words": ("keywords:forbidden_words", {"forbidden_words": "forbidden_words"}, {}),
    "verify_letter_frequency": ("keywords:letter_frequency", {"letter": "letter", "N": "let_frequency"},
                                {"let_relation": "exactly"}),
    "validate_response_language": ("language:response_language", {"language": "language"}, {}),
    "verify_paragraph_count": ("length_constraints:number_paragraphs", {"N": "num_paragraphs"}, {"divider": "* * *"}),
    "validate_word_constraint": ("length_constraints:number_words", {"N": "num_words", "quantifier": "relation"}, {}),
    "verify_sentence_constraint": ("length_constraints:number_sentences",
                                   {"N": "num_sentences", "quantifier": "relation"}, {}),
    "validate_paragraphs": ("length_constraints:nth_paragraph_first_word",
                            {"N": "num_paragraphs", "i": "nth_paragraph", "first_word": "first_word"}, {}),
    "verify_postscript": ("detectable_content:postscript", {"postscript_marker": "postscript_marker"}, {}),
    "validate_placeholders": ("detectable_content:number_placeholders", {"N": "num_placeholders"}, {}),
    "verify_bullet_points": ("detectable_format:number_bullet_lists", {"N": "num_bullets"}, {}),
    "validate_title": ("detectable_format:title", {}, {}),
    "validate_choice": ("detectable_format:constrained_response", {"options": "options"}, {}),
    "validate_highlighted_sections": ("detectable_format:number_highlighted_sections", {"N": "num_highlights"}, {}),
    "validate_sections": ("detectable_format:multiple_sections",
                          {"N": "num_sections", "section_splitter": "section_spliter"}, {}),
    "validate_json_format": ("detectable_format:json_format", {}, {}),
    "validate_repeat_prompt": ("combination:repeat_prompt", {"original_prompt": "prompt_to_repeat"}, {}),
    "validate_two_responses": ("combination:two_responses", {}, {}),
    "validate_uppercase": ("change_case:english_capital", {}, {}),
    "validate_lowercase": ("change_case:english_lowercase", {}, {}),
    "validate_frequency_capital_words": ("change_case:capital_word_frequency",
                                         {"N": "capital_frequency", "quantifier": "capital_relation"}, {}),
    "validate_end": ("startend:end_checker", {"end_phrase": "end_phrase"}, {}),
    "validate_quotation": ("startend:quotation", {}, {}),
    "validate_no_commas": ("punctuation:no_comma", {}, {}),
}

Constraints = tuple[tuple[str, dict[str, Any]], ...]


@functools.lru_cache(maxsize=1 << 14)
def parse_reference(reference: str) -> Constraints:
    """The constraints of a reference string (forms in the module docstring); ValueError if none."""
    try:
        data = json.loads(reference)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"an if reference is a JSON string naming constraints ({exc})") from None
    parts = data if isinstance(data, list) else [data]
    out: list[tuple[str, dict[str, Any]]] = []
    for part in parts:
        out += _part(part)
    if not out:
        raise ValueError("an if reference names no constraint")
    return tuple(out)


def _part(part: Any) -> list[tuple[str, dict[str, Any]]]:
    if not isinstance(part, dict):
        raise ValueError(f"an if reference part must be a JSON object, got {type(part).__name__}")
    if "func_name" in part:
        return [_rlvr(part)]
    ids = part.get("instruction_id_list", part.get("instruction_id"))
    if ids is None:
        raise ValueError("an if reference needs 'func_name' (RLVR) or 'instruction_id_list' (IFEval)")
    if isinstance(ids, str):
        ids = [ids]
    kwargs = part.get("kwargs") or [{} for _ in ids]
    if isinstance(kwargs, dict):
        kwargs = [kwargs]
    if len(kwargs) != len(ids):
        raise ValueError(f"{len(ids)} instruction ids but {len(kwargs)} kwargs")
    return [(str(name), arguments(str(name), kw or {})) for name, kw in zip(ids, kwargs)]


def _rlvr(part: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    func = part["func_name"]
    if func not in RLVR_FUNCTIONS:
        raise ValueError(f"unknown RLVR constraint function {func!r}; known: {', '.join(sorted(RLVR_FUNCTIONS))}")
    name, renames, fixed = RLVR_FUNCTIONS[func]
    given = {k: v for k, v in part.items() if k != "func_name" and v is not None}
    extra = sorted(set(given) - set(renames))
    if extra:
        raise ValueError(f"RLVR constraint {func!r} takes no argument {extra[0]!r}")
    kwargs = {renames[k]: v for k, v in given.items()}
    return name, arguments(name, {**fixed, **kwargs})


def canonical(reference: str) -> str:
    """The IFEval form (`instruction_id_list` + `kwargs`) of any accepted reference, as JSON."""
    constraints = parse_reference(reference)
    return json.dumps({"instruction_id_list": [n for n, _ in constraints],
                       "kwargs": [kw for _, kw in constraints]}, sort_keys=True)


def claims(reference: Any) -> bool:
    """Whether a bare reference handed to an adapter (JSON text, or the object a dataset column gives) is an
    instruction-following one."""
    if isinstance(reference, (dict, list)):
        try:
            reference = json.dumps(reference)
        except (TypeError, ValueError):
            return False
    if not isinstance(reference, str) or not reference.lstrip().startswith(("{", "[")):
        return False
    try:
        parse_reference(reference)
    except ValueError:
        return False
    return True
