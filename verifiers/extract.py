"""Answer extraction: find the final answer a model gave, as a short string, without parsing math.

Order (first that applies wins):
1. completions longer than `max_completion_chars` keep only their *tail* (answers come last);
2. text after the last `</think>` when present; an unclosed `<think>` means the model never left its
   reasoning, so there is no answer (text inside `<think>` is never scored);
3. the last well-formed `\\boxed{...}` / `\\fbox{...}` (nested braces, escaped `\\{ \\}` ignored for
   balance) or `\\boxed 5` (the TeX one-token form); a box whose braces never close (a truncated
   completion) is skipped in favour of an earlier one;
4. fallbacks users expect, searched in the last `FALLBACK_WINDOW_CHARS` characters only:
   "final answer is X" / "answer: X" / GSM8K's "#### X" (the last such phrase), then a trailing
   `$...$`, `\\(...\\)` or `\\[...\\]` that ends the text.

Guarantees: linear time in the completion length (no backtracking regex runs over unbounded text);
never raises on any `str`; an answer longer than `max_answer_chars` is reported as `too_long` (the
verifier maps it to `unparsable`) instead of being handed to sympy.
Non-guarantees: the extracted text is not validated as mathematics; that is the comparator's job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

FALLBACK_WINDOW_CHARS = 4000
BOX_COMMANDS = ("\\boxed", "\\fbox")
MAX_BOXES_TRIED = 32  # malformed boxes skipped before giving up; bounds the work on hostile text
Kind = Literal["answer", "no_answer", "too_long"]


@dataclass(frozen=True)
class Extraction:
    kind: Kind
    answer: str = ""
    method: str = ""  # boxed | phrase | trailing_math | "" (none)


_PHRASE = re.compile(
    r"(?:final answer(?: is)?|the answer is|answer\s*:|####)\s*:?\s*([^\n]{1,400})", re.IGNORECASE
)
_TRAILING_MATH = re.compile(r"(\$\$?|\\\(|\\\[)([^$]{1,2000}?)(\$\$?|\\\)|\\\])\s*[.!]?\s*$", re.DOTALL)


def extract_answer(completion: str, *, max_completion_chars: int = 1_000_000,
                   max_answer_chars: int = 1000) -> Extraction:
    """The final answer in `completion` (see the module docstring for the rules)."""
    text = completion[-max_completion_chars:] if len(completion) > max_completion_chars else completion
    close = text.rfind("</think>")
    if close >= 0:
        text = text[close + len("</think>"):]
    elif "<think>" in text:
        return Extraction("no_answer")
    for finder, method in ((_last_box, "boxed"), (_phrase, "phrase"), (_trailing_math, "trailing_math")):
        found = finder(text, max_answer_chars)
        if found is None:
            continue
        if found is TOO_LONG:
            return Extraction("too_long", method=method)
        answer = clean_answer(found)
        if len(answer) > max_answer_chars:
            return Extraction("too_long", method=method)
        if answer:
            return Extraction("answer", answer, method)
    return Extraction("no_answer")


TOO_LONG = "\x00too_long"


def _last_box(text: str, cap: int) -> str | None:
    """Content of the last well-formed box command, scanning boxes right to left."""
    end = len(text)
    for _ in range(MAX_BOXES_TRIED):
        start = max(text.rfind(cmd, 0, end) for cmd in BOX_COMMANDS)
        if start < 0:
            return None
        cmd = "\\boxed" if text.startswith("\\boxed", start) else "\\fbox"
        content = _box_content(text, start + len(cmd), cap)
        if content is not None:
            return content
        end = start
    return None


def _box_content(text: str, pos: int, cap: int) -> str | None:
    """Braced group (or TeX single token) starting at `pos`; None when malformed, TOO_LONG past cap."""
    after = pos
    while after < len(text) and after - pos < 8 and text[after] == " ":
        after += 1
    if after < len(text) and text[after] == "{":
        return _braced(text, after, cap)
    if after > pos:
        token = re.match(rf"[^\s$]{{1,{cap + 1}}}", text[after:after + cap + 1])
        if token:
            return TOO_LONG if len(token.group(0)) > cap else token.group(0)
    return None


def _braced(text: str, open_pos: int, cap: int) -> str | None:
    depth, i, limit = 0, open_pos, len(text)
    while i < limit:
        ch = text[i]
        if ch == "\\":
            i += 2  # an escaped character (\{ \} \\) never changes the group depth
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[open_pos + 1:i]
        if i - open_pos > cap + 1:
            return TOO_LONG  # closed or not, past the cap it is not an answer we hand to sympy
        i += 1
    return None


def _phrase(text: str, cap: int) -> str | None:
    window = text[-FALLBACK_WINDOW_CHARS:]
    last = None
    for last in _PHRASE.finditer(window):
        pass
    if last is None:
        return None
    answer = last.group(1).strip()
    # "The answer is 42. It follows because ..." -> 42; keep decimals like 3.5 intact.
    answer = re.split(r"(?<!\d)\.(?!\d)|\.\s", answer, maxsplit=1)[0]
    return answer


def _trailing_math(text: str, cap: int) -> str | None:
    if (text.count("$") - text.count("\\$")) % 2:
        return None  # an unclosed `$` (a truncated completion): the "span" before it is prose, not math
    match = _TRAILING_MATH.search(text[-FALLBACK_WINDOW_CHARS:])
    if match is None:
        return None
    return match.group(2)


def clean_answer(answer: str) -> str:
    """Strip what surrounds an answer but is not part of it: whitespace, `$`, a trailing period."""
    answer = answer.strip()
    for _ in range(3):
        stripped = answer.strip().strip("$").strip()
        stripped = re.sub(r"^\\\(|\\\)$|^\\\[|\\\]$", "", stripped).strip()
        if stripped.endswith("."):
            stripped = stripped[:-1].rstrip()
        if stripped == answer:
            break
        answer = stripped
    return answer
