"""Answer extraction: find the final answer a model gave, as a short string, without parsing math.

Order (first that applies wins):
1. completions longer than `max_completion_chars` keep only their *tail* (answers come last);
2. text after the last `</think>` when present; an unclosed `<think>` means the model never left its
   reasoning, so there is no answer (text inside `<think>` is never scored);
3. the last well-formed `\\boxed{...}` / `\\fbox{...}` (nested braces, escaped `\\{ \\}` ignored for
   balance) or `\\boxed 5` (the TeX one-token form); a box whose braces never close (a truncated
   completion) is skipped in favour of an earlier one. A final-answer marker written *after* that
   box ("# Answer", "Final Answer", "the answer is", "####"; a bare "answer:" does not count) whose
   span is mathematics and differs from the box (a `$...$` span, or text that starts with a digit,
   sign, command or bracket, or holds no word of three letters) is the model's later statement and
   wins over it (`\\boxed{2}` and `\\boxed{3}`, then `# Answer` with `2, 3`); words never displace a box;
4. fallbacks users expect, searched in the last `FALLBACK_WINDOW_CHARS` characters only
   (`scalerl.verifiers.math.extract_phrases`): the last final-answer marker ("The answer is", "Final Answer:",
   "final answer is", "# Answer", GSM8K's "####") followed by a bounded span (a math span, or a short
   answer-like phrase: prose after a marker is never taken), then the math span that ends the text,
   then a whole completion that is one short line (a bare answer), then a last line that is only math.
   A sign before the opening `$` and a `%`, degree or unit word
   after the closing one stay with the answer. `answer_format="boxed"` skips this step.

Guarantees: linear time in the completion length (no backtracking regex runs over unbounded text);
never raises on any `str`; an answer longer than `max_answer_chars` is reported as `too_long` (the
verifier maps it to `unparsable`) instead of being handed to sympy.
Non-guarantees: the extracted text is not validated as mathematics; that is the comparator's job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from scalerl.verifiers.math.extract_phrases import bare_answer, phrase_answer, trailing_answer

FALLBACK_WINDOW_CHARS = 4000
BOX_COMMANDS = ("\\boxed", "\\fbox")
MAX_BOXES_TRIED = 32  # malformed boxes skipped before giving up; bounds the work on hostile text
Kind = Literal["answer", "no_answer", "too_long"]


@dataclass(frozen=True)
class Extraction:
    kind: Kind
    answer: str = ""
    method: str = ""  # boxed | phrase | trailing_math | "" (none)


AnswerFormat = Literal["any", "boxed"]


def extract_answer(completion: str, *, max_completion_chars: int = 1_000_000,
                   max_answer_chars: int = 1000, answer_format: AnswerFormat = "any") -> Extraction:
    """The final answer in `completion` (see the module docstring for the rules). Under
    `answer_format="boxed"` only a box counts: a missing box is `no_answer`, a format failure."""
    text = completion[-max_completion_chars:] if len(completion) > max_completion_chars else completion
    close = text.rfind("</think>")
    if close >= 0:
        text = text[close + len("</think>"):]
    elif "<think>" in text:
        return Extraction("no_answer")
    finders = ((_last_box, "boxed"),) if answer_format == "boxed" else FINDERS
    for finder, method in finders:
        found = finder(text, max_answer_chars)
        if isinstance(found, tuple):  # the box finder says which of its two sources it used
            found, method = found
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
    return _last_box_at(text, cap)[0]


def _last_box_at(text: str, cap: int) -> tuple[str | None, int]:
    """(content, start) of the last well-formed box command; (None, -1) when there is none."""
    end = len(text)
    for _ in range(MAX_BOXES_TRIED):
        start = max(text.rfind(cmd, 0, end) for cmd in BOX_COMMANDS)
        if start < 0:
            return None, -1
        cmd = "\\boxed" if text.startswith("\\boxed", start) else "\\fbox"
        content = _box_content(text, start + len(cmd), cap)
        if content is not None:
            return content, start
        end = start
    return None, -1


def _box_or_later_marker(text: str, cap: int) -> tuple[str | None, str]:
    """(answer, method): the math span of a final-answer marker written after the last box when it
    differs from the box ("phrase"), else the box's content ("boxed"); (None, "boxed") without a box."""
    content, start = _last_box_at(text, cap)
    tail = text[start:]
    if content is None or content is TOO_LONG or ("answer" not in tail.lower() and "####" not in tail):
        return content, "boxed"
    cmd = "\\boxed" if text.startswith("\\boxed", start) else "\\fbox"
    after = text.find(content, start + len(cmd)) + len(content)  # the content follows the command
    later = phrase_answer(text[after:][-FALLBACK_WINDOW_CHARS:], after_box=True)
    if later and clean_answer(later) != clean_answer(content):
        return later, "phrase"
    return content, "boxed"


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
    return phrase_answer(text[-FALLBACK_WINDOW_CHARS:])


def _trailing_math(text: str, cap: int) -> str | None:
    return trailing_answer(text[-FALLBACK_WINDOW_CHARS:])


def _bare(text: str, cap: int) -> str | None:
    return bare_answer(text)


FINDERS = ((_box_or_later_marker, "boxed"), (_phrase, "phrase"), (_bare, "bare"), (_trailing_math, "trailing_math"))


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
