"""Random responses for a differential check of the `if` checker against IFEval's reference.

`generate()` builds N (constraint, arguments, response) items from a fixed seed: responses are made of
words and punctuation that sit on the checks' edges (abbreviations, initials, `!!!`, hyphens, contractions,
markdown, dividers, brackets, titles, postscripts, blank and whitespace-only lines, all-caps and lowercase
text), arguments drawn per constraint. Deterministic: `random.Random(seed)` with `choice`, `randint`,
`sample` and `random`, whose sequences Python keeps stable.

    python random_responses.py > r.jsonl                        # the items
    python reference_verdicts.py < r.jsonl | python random_responses.py --pack > random_verdicts.json

`--pack` reads labelled items and writes the reference's verdicts as one string of 0/1 (`e` where the
reference raised), with the seed and count; tests/verifiers/test_if_reference_agreement.py regenerates the
items and compares.
"""

from __future__ import annotations

import json
import random
import sys

SEED, COUNT = 40, 4000
WORDS = ("the cat sat on a mat and the category of cats was Sunny sun WELL-KNOWN FACT Dr. Mr. e.g. i.e. etc. U.S. "
         "J. 1. 2.5 3.14 don't DON'T it's IT'S AND/OR summary Summary Alpha alpha beta [name] [address] *bold* "
         "**strong** << title >> <<Poem>> P.S. P.P.S note: hello HELLO world WORLD ok OK yes no maybe").split()
ENDS = (".", ".", "!", "?", "...", "!!!", "?!", "", '."', ".)")
SEPARATORS = ("\n\n", "\n", "\n\n\n", "\n \n", "\n***\n", "\n* * *\n", " ", "\n\n")
RELATIONS = ("less than", "at least")


def _arguments(rng: random.Random) -> dict:
    """Each constraint's argument draws, in one table (called in this order for every item)."""
    n = rng.randint(1, 4)
    return {
        "keywords:existence": {"keywords": rng.sample(["cat", "sun", "summary", "world", "alpha"], 2)},
        "keywords:frequency": {"keyword": rng.choice(["cat", "sun", "world", "alpha"]),
                               "frequency": rng.randint(1, 4), "relation": rng.choice(RELATIONS)},
        "keywords:forbidden_words": {"forbidden_words": rng.sample(["cat", "sun", "mat", "ok", "no"], 2)},
        "keywords:letter_frequency": {"letter": rng.choice("aeiost"), "let_frequency": rng.randint(2, 15),
                                      "let_relation": rng.choice(RELATIONS)},
        "length_constraints:number_sentences": {"num_sentences": rng.randint(1, 10), "relation": rng.choice(RELATIONS)},
        "length_constraints:number_paragraphs": {"num_paragraphs": n},
        "length_constraints:number_words": {"num_words": rng.randint(5, 60), "relation": rng.choice(RELATIONS)},
        "length_constraints:nth_paragraph_first_word": {
            "num_paragraphs": n, "nth_paragraph": rng.randint(1, n),
            "first_word": rng.choice(["summary", "alpha", "the", "hello"])},
        "detectable_content:number_placeholders": {"num_placeholders": rng.randint(1, 3)},
        "detectable_content:postscript": {"postscript_marker": rng.choice(["P.S.", "P.P.S"])},
        "detectable_format:number_bullet_lists": {"num_bullets": rng.randint(0, 3)},
        "detectable_format:constrained_response": {},
        "detectable_format:number_highlighted_sections": {"num_highlights": rng.randint(1, 3)},
        "detectable_format:multiple_sections": {"section_spliter": rng.choice(["SECTION", "Section"]),
                                                "num_sections": rng.randint(1, 3)},
        "detectable_format:json_format": {},
        "detectable_format:title": {},
        "combination:two_responses": {},
        "startend:end_checker": {"end_phrase": rng.choice(["bye", "ok.", "Any other questions?"])},
        "startend:quotation": {},
        "change_case:capital_word_frequency": {"capital_frequency": rng.randint(1, 8),
                                               "capital_relation": rng.choice(RELATIONS)},
        "change_case:english_capital": {},
        "change_case:english_lowercase": {},
        "punctuation:no_comma": {},
        "language:response_language": {"language": rng.choice(["en", "fr"])},
    }


def _response(rng: random.Random) -> str:
    def sentence() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) + rng.choice(ENDS)

    paragraphs = [" ".join(sentence() for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 4))]
    text = paragraphs[0] + "".join(rng.choice(SEPARATORS) + p for p in paragraphs[1:])
    case = rng.random()
    text = text.upper() if case < 0.1 else text.lower() if case < 0.2 else text
    if rng.random() < 0.15:
        text = rng.choice(["\n\n", "Sure:\n", "**Summary**\n\n"]) + text
    if rng.random() < 0.15:
        text += rng.choice(["\nP.S. bye", "\n\nP.P.S more", "\nP.S."])
    return text


def generate(count: int = COUNT, seed: int = SEED) -> list[dict]:
    rng = random.Random(seed)
    items = []
    for n in range(count):
        drawn = _arguments(rng)
        name = rng.choice(sorted(drawn))
        items.append({"id": f"random-{n}", "constraint": name, "kwargs": drawn[name], "response": _response(rng)})
    return items


def main(argv: list[str]) -> None:
    if "--pack" in argv:
        verdicts = "".join("e" if isinstance(r, str) else str(int(r))
                           for r in (json.loads(line)["reference"] for line in sys.stdin))
        print(json.dumps({"seed": SEED, "count": len(verdicts), "reference": verdicts}))
        return
    for item in generate():
        print(json.dumps(item, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv)
