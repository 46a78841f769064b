"""Instruction-following constraints (IFEval's public list): each a small pure function in one registry.

A constraint is `check(text, **arguments) -> bool`, registered under its IFEval instruction id
(`length_constraints:number_words`, ...). Its signature is its argument schema: `arguments(name, kwargs)`
validates and coerces a reference's arguments against it (pydantic), so a bad reference is refused when a
record is built, not when a completion is scored. `followed(name, text, kwargs, mode)` applies IFEval's
two modes: `strict` checks the response as given (an empty response follows nothing); `loose` also
accepts when any variant passes: the first line removed, the last line removed, both, and each of the
four with every `*` removed.

Agreement with Google's reference implementation (instruction_following_eval): sentences and capital
words are counted with its own tokenizers (nltk's punkt English model and word tokenizer,
`scalerl.verifiers.ifeval.tokens`); words are runs of `\\w`, as its `RegexpTokenizer(r"\\w+")`; keyword
frequency counts text anywhere, as it does. Every intended difference (keywords are literal text, never
regular expressions; a postscript needs text after its marker; a response with no letters is in no
language; the "in English" half of the case checks; the n-th paragraph is the n-th non-empty one) is
listed, with its reason, in docs/domains.md ("Agreement with IFEval's reference"); beyond IFEval: the
relations `at most`, `exactly` and `around` (|count − N| ≤ max(1, round(N / 10))) and the arguments
`options`, `whole_words` and `divider` that RLVR's (Tülu 3) references need.

Guarantees: every check is total on any text (it returns a bool; only `ConstraintUnavailable` is raised,
and only by the language check); all but the sentence and capital-word counts (nltk's tokenizers) use
regular expressions without nested quantifiers, so their time is linear in the text. Not guaranteed:
that a check catches every way a model can game the constraint.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from scalerl.verifiers.ifeval.tokens import capital_words, sentences
from scalerl.verifiers.verifier_config import IfMode

Relation = Literal["less than", "at least", "at most", "exactly", "around"]
Count = Annotated[int, Field(ge=0)]

CONSTRAINED_RESPONSES = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


class ConstraintUnavailable(RuntimeError):
    """A constraint whose check needs something not installed (the item is an `error`, not a reward)."""


@dataclass(frozen=True)
class Constraint:
    name: str
    check: Callable[..., bool]
    arguments: type[BaseModel]  # built from the check's signature


CONSTRAINTS: dict[str, Constraint] = {}


def constraint(name: str):
    """Register `check` as constraint `name`; its keyword parameters (after `text`) are its arguments."""

    def register(check: Callable[..., bool]) -> Callable[..., bool]:
        fields: dict[str, Any] = {}
        for param in list(inspect.signature(check, eval_str=True).parameters.values())[1:]:
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (param.annotation, default)
        model = create_model(f"Args_{name.replace(':', '_')}", __config__=ConfigDict(extra="forbid"), **fields)
        CONSTRAINTS[name] = Constraint(name, check, model)
        return check

    return register


def arguments(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` validated for constraint `name` (None values dropped, as the public datasets pad with them);
    ValueError naming the constraint and the argument at fault."""
    if name not in CONSTRAINTS:
        raise ValueError(f"unknown constraint {name!r}; known: {', '.join(sorted(CONSTRAINTS))}")
    given = {k: v for k, v in (kwargs or {}).items() if v is not None}
    try:
        return CONSTRAINTS[name].arguments.model_validate(given).model_dump()
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        raise ValueError(f"constraint {name!r}, argument {where}: {err['msg']}") from None


def loose_variants(text: str) -> list[str]:
    """IFEval's loose responses: as given, without the first line, the last, both; each also without `*`."""
    lines = text.split("\n")
    cut = [text, "\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(), "\n".join(lines[1:-1]).strip()]
    return cut + [v.replace("*", "") for v in cut]


def followed(name: str, text: str, kwargs: dict[str, Any], mode: IfMode = "strict") -> bool:
    """Whether `text` follows constraint `name` with validated `kwargs` in `mode` (module docstring)."""
    check = CONSTRAINTS[name].check
    variants = [text] if mode == "strict" else loose_variants(text)
    return any(v.strip() and check(v, **kwargs) for v in variants)


def compare(actual: int, n: int, relation: str) -> bool:
    if relation == "less than":
        return actual < n
    if relation == "at least":
        return actual >= n
    if relation == "at most":
        return actual <= n
    if relation == "exactly":
        return actual == n
    return abs(actual - n) <= max(1, round(n / 10))  # around


# ------------------------------------------------------------------------------------------- counting
_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """Runs of word characters: IFEval's `RegexpTokenizer(r"\\w+")`, what it counts as words."""
    return _WORD.findall(text)


# ------------------------------------------------------------------------------------------- keywords
@constraint("keywords:existence")
def keywords_existence(text: str, keywords: list[str]) -> bool:
    """Every keyword appears (case-insensitive substring)."""
    lower = text.lower()
    return all(k.lower() in lower for k in keywords)


def _word_count(text: str, word: str) -> int:
    return len(re.findall(rf"(?<!\w){re.escape(word.strip())}(?!\w)", text, flags=re.IGNORECASE))


def _occurrences(text: str, keyword: str) -> int:
    return len(re.findall(re.escape(keyword.strip()), text, flags=re.IGNORECASE))


@constraint("keywords:frequency")
def keyword_frequency(text: str, keyword: str, frequency: Count, relation: Relation = "at least",
                      whole_words: bool = False) -> bool:
    """The keyword appears `relation` `frequency` times, case-insensitive: as text anywhere, as IFEval counts
    ("cat" in "category"), or as a whole word with `whole_words` (RLVR's count)."""
    count = _word_count(text, keyword) if whole_words else _occurrences(text, keyword)
    return compare(count, frequency, relation)


@constraint("keywords:forbidden_words")
def forbidden_words(text: str, forbidden_words: list[str]) -> bool:
    """None of the words appears as a whole word (case-insensitive)."""
    return not any(_word_count(text, w) for w in forbidden_words if w.strip())


@constraint("keywords:letter_frequency")
def letter_frequency(text: str, letter: Annotated[str, Field(min_length=1, max_length=1)],
                     let_frequency: Count, let_relation: Relation = "at least") -> bool:
    """The letter appears `let_relation` `let_frequency` times (case-insensitive)."""
    return compare(text.lower().count(letter.lower()), let_frequency, let_relation)


# ------------------------------------------------------------------------------------------- language
def languages(text: str) -> list:
    """langdetect's languages of `text`, most probable first ([] for text in no language: no letters).
    ImportError when langdetect is not installed: each caller decides what that means."""
    import langdetect

    langdetect.DetectorFactory.seed = 0  # langdetect samples; a fixed seed makes the verdict repeatable
    try:
        return langdetect.detect_langs(text)
    except langdetect.LangDetectException:
        return []


@constraint("language:response_language")
def response_language(text: str, language: str) -> bool:
    """The response's language (langdetect's ISO 639-1 code) is `language`."""
    try:
        found = languages(text)
    except ImportError:
        raise ConstraintUnavailable("language:response_language needs langdetect (pip install langdetect)") from None
    return bool(found) and found[0].lang == language


# ------------------------------------------------------------------------------------------- length
@constraint("length_constraints:number_sentences")
def number_sentences(text: str, num_sentences: Count, relation: Relation = "at least") -> bool:
    """punkt's English sentences (scalerl.verifiers.ifeval.tokens), as IFEval counts them."""
    return compare(len(sentences(text)), num_sentences, relation)


@constraint("length_constraints:number_paragraphs")
def number_paragraphs(text: str, num_paragraphs: Count, divider: Literal["***", "* * *"] = "***") -> bool:
    """Exactly N paragraphs separated by the markdown divider (IFEval's `***`; RLVR's prompts name `* * *`);
    an empty one between two dividers fails (empty ends are ignored)."""
    parts = re.split(r"\s?" + re.escape(divider) + r"\s?", text)
    count = len(parts)
    for index, part in enumerate(parts):
        if not part.strip():
            if index not in (0, len(parts) - 1):
                return False
            count -= 1
    return count == num_paragraphs


@constraint("length_constraints:number_words")
def number_words(text: str, num_words: Count, relation: Relation = "at least") -> bool:
    return compare(len(words(text)), num_words, relation)


@constraint("length_constraints:nth_paragraph_first_word")
def nth_paragraph_first_word(text: str, num_paragraphs: Annotated[int, Field(ge=1)],
                             nth_paragraph: Annotated[int, Field(ge=1)], first_word: str) -> bool:
    """Exactly N non-empty paragraphs separated by `\\n\\n`, the n-th starting with `first_word`. As IFEval
    reads it: the first word is the paragraph's first token without leading `'` and `"`, up to its first
    `.`, `,`, `?`, `!`, `'` or `"`, without case (so `**Alpha**` and `Alpha:` are not `alpha`)."""
    parts = [p for p in text.split("\n\n") if p.strip()]
    if len(parts) != num_paragraphs or nth_paragraph > len(parts):
        return False
    token = parts[nth_paragraph - 1].split()[0].lstrip("'").lstrip('"')
    found = re.match(r"[^.,?!'\"]*", token).group()
    return found.lower() == first_word.strip().lower()


# ------------------------------------------------------------------------------------------- content
@constraint("detectable_content:number_placeholders")
def number_placeholders(text: str, num_placeholders: Count) -> bool:
    """At least N placeholders in square brackets, such as [address]."""
    return len(re.findall(r"\[[^\[\]\n]*\]", text)) >= num_placeholders


@constraint("detectable_content:postscript")
def postscript(text: str, postscript_marker: str) -> bool:
    """The marker (P.S. and P.P.S. with optional inner spaces; any other marker as written, without case)
    followed by text on its line."""
    marker = postscript_marker.strip().lower()
    if marker.rstrip(".") == "p.p.s":
        pattern = r"p\.\s?p\.\s?s\b\.?"
    elif marker.rstrip(".") == "p.s":
        pattern = r"p\.\s?s\."
    else:
        pattern = re.escape(marker)
    return re.search(pattern + r"[^\S\n]*[^\s]", text.lower()) is not None


# ------------------------------------------------------------------------------------------- format
@constraint("detectable_format:number_bullet_lists")
def number_bullet_lists(text: str, num_bullets: Count) -> bool:
    """Exactly N markdown bullets (lines starting with `* ` or `- `)."""
    stars = re.findall(r"^\s*\*[^\*].*$", text, flags=re.MULTILINE)
    dashes = re.findall(r"^\s*-.*$", text, flags=re.MULTILINE)
    return len(stars) + len(dashes) == num_bullets


def _options(value: str | tuple[str, ...]) -> list[str]:
    """The options as a list: given as one, or RLVR's text forms: a Python literal tuple or list, or
    "A or B" (else "A, B")."""
    if not isinstance(value, str):
        return [str(v) for v in value]
    text = value.strip()
    if text[:1] in "([":
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            parsed = None
        if isinstance(parsed, (list, tuple)):
            return [str(p) for p in parsed]
    parts = re.split(r"\s+or\s+", text)
    if len(parts) == 1:
        parts = text.split(",")
    return [p.strip() for p in parts if p.strip()]


@constraint("detectable_format:constrained_response")
def constrained_response(text: str, options: str | tuple[str, ...] = CONSTRAINED_RESPONSES) -> bool:
    """The response contains one of the options (IFEval's three "My answer is ..." by default)."""
    stripped = text.strip()
    return any(option and option in stripped for option in _options(options))


@constraint("detectable_format:number_highlighted_sections")
def number_highlighted_sections(text: str, num_highlights: Count) -> bool:
    """At least N sections highlighted with markdown, *like this* or **like this**, each non-empty."""
    found = re.findall(r"\*[^\n\*]*\*", text) + re.findall(r"\*\*[^\n\*]*\*\*", text)
    return sum(1 for h in found if h.strip("*").strip()) >= num_highlights


@constraint("detectable_format:multiple_sections")
def multiple_sections(text: str, section_spliter: str, num_sections: Count) -> bool:
    """At least N sections, each starting with the splitter and a number ("SECTION 1")."""
    pattern = r"\s?" + re.escape(section_spliter.strip()) + r"\s?\d+\s?"
    return len(re.split(pattern, text)) - 1 >= num_sections


@constraint("detectable_format:json_format")
def json_format(text: str) -> bool:
    """The whole response is JSON; a surrounding fence (```, ```json, ```Json or ```JSON) is allowed."""
    body = text.strip()
    for fence in ("```json", "```Json", "```JSON", "```"):  # in IFEval's order, each removed once
        body = body.removeprefix(fence)
    body = body.removesuffix("```").strip()
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


@constraint("detectable_format:title")
def title(text: str) -> bool:
    """A non-empty title in double angular brackets, such as <<poem of joy>>. As IFEval's greedy `<<[^\\n]+>>`
    reads a line: from its first `<<` to its last `>>`, then `<` and `>` stripped from the ends."""
    for line in text.split("\n"):
        start, end = line.find("<<"), line.rfind(">>")
        if start >= 0 and end >= start + 3 and line[start:end + 2].lstrip("<").rstrip(">").strip():
            return True
    return False


# ------------------------------------------------------------------------------------------- combination
@constraint("combination:two_responses")
def two_responses(text: str) -> bool:
    """Two different responses separated by six asterisks (******), nothing empty between them."""
    parts = text.split("******")
    kept = []
    for index, part in enumerate(parts):
        if not part.strip():
            if index not in (0, len(parts) - 1):
                return False
            continue
        kept.append(part.strip())
    return len(kept) == 2 and kept[0] != kept[1]


@constraint("combination:repeat_prompt")
def repeat_prompt(text: str, prompt_to_repeat: str) -> bool:
    """The response starts with the request, repeated without change (case-insensitive)."""
    return text.strip().lower().startswith(prompt_to_repeat.strip().lower())


# ------------------------------------------------------------------------------------------- start / end
@constraint("startend:end_checker")
def end_checker(text: str, end_phrase: str) -> bool:
    """The response ends with the phrase (case-insensitive; surrounding quotes ignored)."""
    return text.strip().strip('"').lower().endswith(end_phrase.strip().lower())


@constraint("startend:quotation")
def quotation(text: str) -> bool:
    """The whole response is wrapped in double quotation marks."""
    body = text.strip()
    return len(body) > 1 and body[0] == '"' and body[-1] == '"'


# ------------------------------------------------------------------------------------------- case, punctuation
@constraint("change_case:capital_word_frequency")
def capital_word_frequency(text: str, capital_frequency: Count, capital_relation: Relation = "at least") -> bool:
    """All-capital words appear `capital_relation` `capital_frequency` times; words are nltk's word tokens, as
    IFEval counts them (a hyphenated word is one word, "DON'T" is two)."""
    return compare(capital_words(text), capital_frequency, capital_relation)


LANGUAGE_MIN_WORDS = 8  # below this, langdetect's guess on English text is often another language


def not_english(text: str) -> bool:
    """The response is detectably in another language (the "in English" half of the case constraints)."""
    letters = [c for c in text if c.isalpha()]
    if letters and sum(ord(c) > 0x24F for c in letters) * 2 > len(letters):  # mostly beyond Latin Extended
        return True
    if len(words(text)) < LANGUAGE_MIN_WORDS:
        return False
    try:
        found = languages(text.lower())  # lower case: capitals alone mislead langdetect
    except ImportError:
        return False
    return bool(found) and found[0].lang != "en" and found[0].prob >= 0.9


@constraint("change_case:english_capital")
def english_capital(text: str) -> bool:
    """Capital letters only (at least one letter), in English."""
    return text.isupper() and not not_english(text)


@constraint("change_case:english_lowercase")
def english_lowercase(text: str) -> bool:
    """Lowercase letters only (at least one letter), in English."""
    return text.islower() and not not_english(text)


@constraint("punctuation:no_comma")
def no_comma(text: str) -> bool:
    return "," not in text
