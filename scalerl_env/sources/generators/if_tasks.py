"""Instruction-following task families: a short request with IFEval constraints and a response that follows them.

Each family is `make(rng, level) -> Generated`; the answer is the IFEval form of the reference
(`{"instruction_id_list": [...], "kwargs": [...]}`, see `scalerl.verifiers.ifeval.reference`) and the solution is a
response built to follow it, so it is `correct` in strict mode by construction (the generator tests
score every family's gold with the real verifier).

Level 0 (the built-in tiny model): one format rule on one to three short words that the response must
use ("Write sun sky in capitals."), prompts under 60 characters and answers under 16. Level 1 adds the
format constraints (title, JSON, bullets, placeholders, postscript, highlights, sections, two responses,
letter and capital-word counts, forbidden words, sentences, paragraphs, fixed answers, repeating the
request). Level 2 adds requests
with two constraints at once.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from .types import Generated

WORDS = ("cat", "dog", "sun", "red", "sky", "tree", "fish", "milk", "rain", "bird", "blue", "moon", "star",
         "leaf", "rock", "wind", "frog", "lamp", "rose", "snow")


def _task(prompt: str, solution: str, *constraints: tuple[str, dict]) -> Generated:
    answer = json.dumps({"instruction_id_list": [c[0] for c in constraints], "kwargs": [c[1] for c in constraints]})
    return Generated(prompt=prompt, solution=solution, answer=answer)


def _words(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(WORDS) for _ in range(n)]


# ------------------------------------------------------------------------------------------- level 0
# Every level-0 request names the words to use (`keywords:existence`) beside its format rule, so a response
# that ignores the request (random text, an empty-looking line) does not pass: text without commas or in
# lowercase is common, the named words are not.
def _uses(*words: str) -> tuple[str, dict]:
    return ("keywords:existence", {"keywords": list(words)})


def lowercase(rng: random.Random, level: int) -> Generated:
    a, b = _words(rng, 2)
    return _task(f"Write {a.upper()} {b.upper()} in lowercase.", f"{a} {b}",
                 ("change_case:english_lowercase", {}), _uses(a, b))


def capitals(rng: random.Random, level: int) -> Generated:
    a, b = _words(rng, 2)
    return _task(f"Write {a} {b} in capitals.", f"{a} {b}".upper(), ("change_case:english_capital", {}), _uses(a, b))


def word_count(rng: random.Random, level: int) -> Generated:
    n = rng.randint(2, 3 if level == 0 else 12)
    words = _words(rng, n)
    return _task(f"Write exactly {n} words, one of them {words[0]}.", " ".join(words),
                 ("length_constraints:number_words", {"num_words": n, "relation": "exactly"}), _uses(words[0]))


def keyword(rng: random.Random, level: int) -> Generated:
    a, b = _words(rng, 2)
    return _task(f"Use the words {a} and {b}.", f"{a} {b}", _uses(a, b))


def quoted(rng: random.Random, level: int) -> Generated:
    a, b = _words(rng, 2)
    return _task(f"Say {a} {b} in double quotes.", f'"{a} {b}"', ("startend:quotation", {}), _uses(a, b))


def ending(rng: random.Random, level: int) -> Generated:
    a, b = _words(rng, 2)
    return _task(f"Say {a}, end with {b}.", f"{a} {b}", ("startend:end_checker", {"end_phrase": b}), _uses(a))


def no_commas(rng: random.Random, level: int) -> Generated:
    a, b, c = _words(rng, 3)
    return _task(f"List {a}, {b}, {c} without commas.", f"{a} {b} {c}", ("punctuation:no_comma", {}), _uses(a, b, c))


# ------------------------------------------------------------------------------------------- level 1
def titled(rng: random.Random, level: int) -> Generated:
    a, b = _words(rng, 2)
    return _task(f"Write about the {a}. Give a title in double angular brackets, such as <<{b}>>.",
                 f"<<The {a}>>\nThe {a} is here.", ("detectable_format:title", {}))


def json_output(rng: random.Random, level: int) -> Generated:
    w = rng.choice(WORDS)
    return _task(f"Name a {w} color. Wrap your entire output in JSON format.", json.dumps({"color": w}),
                 ("detectable_format:json_format", {}))


def bullets(rng: random.Random, level: int) -> Generated:
    n = rng.randint(2, 5)
    return _task(f"List things you can see. Use exactly {n} markdown bullet points such as:\n* This is a point.",
                 "\n".join(f"* A {w}" for w in _words(rng, n)),
                 ("detectable_format:number_bullet_lists", {"num_bullets": n}))


def placeholders(rng: random.Random, level: int) -> Generated:
    n = rng.randint(1, 3)
    names = ["[name]", "[address]", "[date]"][:n]
    return _task(f"Write a short letter with at least {n} placeholders in square brackets, such as [name].",
                 "Dear " + ", ".join(names) + ", hello.",
                 ("detectable_content:number_placeholders", {"num_placeholders": n}))


def postscript(rng: random.Random, level: int) -> Generated:
    marker = rng.choice(["P.S.", "P.P.S"])
    w = rng.choice(WORDS)
    return _task(f"Describe a {w}. At the end, add a postscript starting with {marker}",
                 f"A {w} is nice.\n\n{marker} I like the {w}.",
                 ("detectable_content:postscript", {"postscript_marker": marker}))


def highlights(rng: random.Random, level: int) -> Generated:
    n = rng.randint(1, 3)
    return _task(f"Describe the sky. Highlight at least {n} sections with markdown, i.e. *highlighted section*.",
                 " ".join(f"*part {i + 1}*" for i in range(n)),
                 ("detectable_format:number_highlighted_sections", {"num_highlights": n}))


def sections(rng: random.Random, level: int) -> Generated:
    n, splitter = rng.randint(2, 3), rng.choice(["SECTION", "PART"])
    return _task(f"Write a plan with {n} sections. Mark the beginning of each section with {splitter} X.",
                 "\n".join(f"{splitter} {i + 1}\nStep {i + 1}." for i in range(n)),
                 ("detectable_format:multiple_sections", {"section_spliter": splitter, "num_sections": n}))


def two_responses(rng: random.Random, level: int) -> Generated:
    a, b = rng.sample(WORDS, 2)
    return _task("Give two different answers, separated by six asterisks: ******. Name an animal word.",
                 f"{a}\n******\n{b}", ("combination:two_responses", {}))


def letters(rng: random.Random, level: int) -> Generated:
    n = rng.randint(2, 4)
    return _task(f"Write a line in which the letter z appears exactly {n} times.", " ".join(["zoo"] * n),
                 ("keywords:letter_frequency", {"letter": "z", "let_frequency": n, "let_relation": "exactly"}))


def capital_words(rng: random.Random, level: int) -> Generated:
    n = rng.randint(1, 3)
    return _task(f"Write a line with at least {n} words in all capital letters.",
                 " ".join(w.upper() for w in _words(rng, n)) + " ok",
                 ("change_case:capital_word_frequency", {"capital_frequency": n, "capital_relation": "at least"}))


def forbidden(rng: random.Random, level: int) -> Generated:
    bad, good = rng.sample(WORDS, 2)
    return _task(f"Name one thing in nature. Do not include the word {bad}.", f"A {good}.",
                 ("keywords:forbidden_words", {"forbidden_words": [bad]}))


def sentence_count(rng: random.Random, level: int) -> Generated:
    n = rng.randint(2, 4)
    return _task(f"Answer in fewer than {n + 1} sentences: what is a {rng.choice(WORDS)}?",
                 " ".join(f"It is thing {i + 1}." for i in range(n)),
                 ("length_constraints:number_sentences", {"num_sentences": n + 1, "relation": "less than"}))


def divided_paragraphs(rng: random.Random, level: int) -> Generated:
    n = rng.randint(2, 3)
    return _task(f"Write {n} paragraphs separated by the markdown divider: * * *",
                 "\n* * *\n".join(f"Paragraph {i + 1}." for i in range(n)),
                 ("length_constraints:number_paragraphs", {"num_paragraphs": n, "divider": "* * *"}))


def first_word(rng: random.Random, level: int) -> Generated:
    n, w = rng.randint(2, 3), rng.choice(WORDS)
    i = rng.randint(1, n)
    body = [f"{w.capitalize()} is first." if k == i else f"Line {k}." for k in range(1, n + 1)]
    return _task(f"Write {n} paragraphs separated by blank lines. Paragraph {i} must start with the word {w}.",
                 "\n\n".join(body), ("length_constraints:nth_paragraph_first_word",
                                      {"num_paragraphs": n, "nth_paragraph": i, "first_word": w}))


def fixed_answer(rng: random.Random, level: int) -> Generated:
    choice = rng.choice(["My answer is yes.", "My answer is no.", "My answer is maybe."])
    return _task("Is the sky blue at noon? Answer with one of: My answer is yes., My answer is no., My answer is "
                 "maybe.", choice, ("detectable_format:constrained_response", {}))


def repeat(rng: random.Random, level: int) -> Generated:
    request = f"Name a word that rhymes with {rng.choice(WORDS)}."
    return _task(f"First repeat the request word for word, then answer. Request: {request}",
                 f"{request} Here is one.", ("combination:repeat_prompt", {"prompt_to_repeat": request}))


# ------------------------------------------------------------------------------------------- level 2
def lowercase_ending(rng: random.Random, level: int) -> Generated:
    a, b = _words(rng, 2)
    return _task(f"Say {a.upper()} in lowercase and end with {b}.", f"{a} {b}",
                 ("change_case:english_lowercase", {}), ("startend:end_checker", {"end_phrase": b}))


def counted_keyword(rng: random.Random, level: int) -> Generated:
    n, w = rng.randint(3, 8), rng.choice(WORDS)
    words = _words(rng, n - 1) + [w]
    return _task(f"Write exactly {n} words, one of them {w}, with no commas.", " ".join(words),
                 ("length_constraints:number_words", {"num_words": n, "relation": "exactly"}),
                 ("keywords:existence", {"keywords": [w]}), ("punctuation:no_comma", {}))


Family = Callable[[random.Random, int], Generated]
_LEVEL1: tuple[Family, ...] = (titled, json_output, bullets, placeholders, postscript, highlights, sections,
                               two_responses, letters, capital_words, forbidden, sentence_count,
                               divided_paragraphs, first_word, fixed_answer, repeat)

IF_FAMILIES: dict[str, tuple[int, Family]] = {
    **{f"if_{f.__name__}": (0, f) for f in (lowercase, capitals, word_count, keyword, quoted, ending, no_commas)},
    **{f"if_{f.__name__}": (1, f) for f in _LEVEL1},
    **{f"if_{f.__name__}": (2, f) for f in (lowercase_ending, counted_keyword)},
}
"""The `if` domain's generator families (its spec's `generator_families`): name → (min_level, make)."""
