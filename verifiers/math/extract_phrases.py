"""Unboxed final answers: a marker phrase followed by a bounded span, or math that ends the text.

`phrase_answer(text, after_box=False)`: the last marker ("The answer is", "final answer is", "Final Answer:",
"Answer:", a "# Answer" heading, GSM8K's "####") whose span reads as an answer. The span is a math
span (`$...$`, `$$...$$`, `\\(...\\)`, `\\[...\\]`) with a sign just before it and a `%`, degree or unit
word just after it kept, or plain text up to the end of its sentence that is short and starts like an
answer (a number, a sign, a command, a bracket, or at most four words not starting with a function
word). So ", I need to increase the GCF by 11" is never an answer.
`bare_answer(text)`: a whole completion that is one short line not starting like prose and holding
mathematics (a digit, a command, `$`, a relation) or a choice letter; words alone are not taken.
`trailing_answer(text)`: the math span that ends the text (not when a `$` is left unclosed), else a
last line that is only math (a number or a short expression).

Guarantees: linear time (regexes without nested quantifiers over a window the caller bounds); never
raises. Not guaranteed: that the span is mathematics (the comparator decides).
"""

from __future__ import annotations

import re

MAX_PLAIN = 120
MARKERS_TRIED = 8
_MARKER = re.compile(
    r"####|^[ \t]*#{1,6}[ \t]*(?:final[ \t]+)?answer\b[ \t]*:?|\*{0,2}final[ \t]+answer\*{0,2}[ \t]*(?::|is\b|\n)"
    r"|\bthe[ \t]+(?:final[ \t]+)?answer[ \t]+(?:is|was)\b|\banswer\*{0,2}[ \t]*:",
    re.IGNORECASE | re.MULTILINE)
_WEAK_MARKER = re.compile(r"answer\*{0,2}[ \t]*:$", re.IGNORECASE)
_OPENERS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
_AFTER = re.compile(r"[ \t]*(\\?%|°|\^\\circ|degrees?\b|[a-zA-Z]{1,12}(?=[ \t]*(?:[.!]|$|\n)))")
_STOP_WORDS = frozenset({"that", "to", "in", "when", "not", "because", "we", "i", "obtained", "found", "given",
                         "as", "by", "which", "what", "how", "then", "if", "the", "a", "an", "this", "it",
                         "there", "so", "therefore", "thus", "correct", "clear", "simply", "just", "still"})
_LINE_MATH = re.compile(r"^[-+(\[]?[\d.\\]" r"[^\n]{0,60}$")
_WORD3 = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{3,}")


def phrase_answer(window: str, *, after_box: bool = False) -> str | None:
    """The span after the last final-answer marker that reads as an answer, else None. With
    `after_box` (text that follows a box), only a marker that announces a final answer by itself
    counts, not a bare "answer:" (prose writes "we may check our answer: ..."), and only a span that
    reads as mathematics."""
    markers = list(_MARKER.finditer(window))
    for marker in reversed(markers[-MARKERS_TRIED:]):
        if after_box and _WEAK_MARKER.match(marker.group(0)):
            continue
        span = _span_after(window, marker.end(), after_box)
        if span:
            return span
    return None


def _span_after(text: str, pos: int, math_only: bool = False) -> str | None:
    head = re.match(r"[ \t*:]*(?:\n[ \t]*){0,3}[ \t*:]*", text[pos:pos + 40])
    pos += head.end() if head else 0
    sign = ""
    match = re.match(r"([-−])[ \t]*(?=\$|\\\(|\\\[)", text[pos:pos + 8])
    if match:
        sign, pos = "-", pos + match.end()
    for open_, close in _OPENERS:
        if text.startswith(open_, pos):
            end = text.find(close, pos + len(open_))
            while open_ == "$" and end > 0 and text[end - 1] == "\\":  # `\$18`: an escaped dollar inside
                end = text.find(close, end + 1)
            if end < 0 or end - pos > 2000:
                return None
            return sign + text[pos + len(open_):end].strip() + _suffix(text, end + len(close))
    if sign:
        return None
    plain = _plain(text[pos:pos + MAX_PLAIN + 40])
    if math_only and plain is not None and not _math_like(plain):
        return None
    return plain


def _math_like(span: str) -> bool:
    """A span that starts like mathematics, or holds no word of three or more letters."""
    return bool(re.match(r"[-+\d\\(\[{.]", span)) or _WORD3.search(
        span.replace("\\frac", "").replace("\\sqrt", "")) is None


def _suffix(text: str, pos: int) -> str:
    """A percent sign, degrees or a unit word written after the closing delimiter."""
    match = _AFTER.match(text, pos)
    if match is None:
        return ""
    unit = match.group(1)
    if unit.endswith("%"):
        return "\\%"
    if unit in ("°", "^\\circ") or unit.startswith("degree"):
        return "^\\circ"
    if unit.lower() in _STOP_WORDS or unit.lower() in ("and", "or", "for", "of", "is"):
        return ""
    return f"\\text{{ {unit}}}"


def _plain(text: str) -> str | None:
    line = text.split("\n", 1)[0]
    line = re.split(r"(?<!\d)\.(?!\d)|\.\s|(?<!\\)[;!?]", line, maxsplit=1)[0].strip().strip("*").strip()
    line = re.split(r",\s+(?:not|but|since|because|which|so|as|and|or)\b", line, maxsplit=1)[0].strip()
    if not line or len(line) > MAX_PLAIN:
        return None
    first = re.match(r"[A-Za-z]+", line)
    if first and first.group(0).lower() in _STOP_WORDS:
        return None
    if re.match(r"[-+\d\\(\[{.]", line):
        return line
    if _WORD3.search(line.replace("\\frac", "").replace("\\sqrt", "")) is None:
        return line  # only symbols and one- or two-letter names: an expression such as x^5 - x^4 + 1
    return line if len(line.split()) <= 4 and not line.startswith(",") else None


_BARE_START = frozenset({"i", "we", "let", "so", "to", "not", "because", "first", "step", "since", "now", "hence",
                         "thus", "therefore", "then", "which", "giving", "gives", "this", "that"})


def bare_answer(text: str) -> str | None:
    """A whole completion that is one short line (a bare final answer), its `$` signs removed."""
    line = text.strip()
    if not line or "\n" in line or len(line) > 80 or len(line.split()) > 8 or "'" in line or "\\boxed" in line \
            or "\\fbox" in line:
        return None
    first = re.match(r"[A-Za-z]+", line)
    if _MARKER.search(line) or (first and first.group(0).lower() in _BARE_START):
        return None
    if not re.search(r"[\d\\$=<>]", line) and not re.match(r"\(?[A-E]\)?(?:\s|$)", line):
        return None  # words alone ("nothing here") are not told apart from prose: no answer
    return line.replace("\\$", "\x00").replace("$", "").replace("\x00", "\\$").strip()


def trailing_answer(window: str) -> str | None:
    """Math that ends the text, or a last line that is only math."""
    if (window.count("$") - window.count("\\$")) % 2:
        return None  # an unclosed `$` (a truncated completion): the "span" before it is prose, not math
    stripped = window.rstrip().rstrip(".!").rstrip()
    percent = re.search(r"(?<=[$)\]])[ \t]*\\?%$", stripped)
    if percent:  # `$50$%`: the percent sign written after the math stays with it
        inner = trailing_answer(stripped[:percent.start()])
        return inner + "\\%" if inner else None
    for open_, close in _OPENERS:
        if stripped.endswith(close) and len(stripped) > len(open_) + len(close):
            start = stripped.rfind(open_, 0, len(stripped) - len(close))
            if open_ == "$" and start > 0 and stripped[start - 1] == "$":
                continue
            if start >= 0:
                inner = stripped[start + len(open_):len(stripped) - len(close)]
                if inner.strip() and "$" not in inner:
                    sign = "-" if re.search(r"(?:^|[\s:(])[-−][ \t]*$", stripped[max(0, start - 3):start]) else ""
                    return sign + inner.strip()
    last = stripped.rsplit("\n", 1)[-1].strip().strip("*").strip()
    words = _WORD3.search(last.replace("\\frac", "").replace("\\sqrt", ""))
    if _LINE_MATH.match(last) and re.search(r"\d", last) and "\\boxed" not in last and not words:
        return last
    return None
