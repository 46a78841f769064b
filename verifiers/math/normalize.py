"""Answer spellings rewritten to the LaTeX that math-verify and the shape rules read, before comparison.

`normalize(answer)` is applied to the reference and to the extracted answer alike, in the worker
(`scalerl.verifiers.math.judge`). Each rewrite keeps the value; none decides a verdict:

    unicode      − ∞ ∪ ∩ ≤ ≥ ≠ × ÷ · π ± ° √x and superscript digits (x²) as LaTeX
    frac         `\\frac{1+a}c`, `\\dfrac12` with both arguments braced
    ordinals     `12^{\\mathrm{th}}`, `15th` -> the number
    degrees      `30°`, `30\\degree`, `30^{\\circ}`, `30 degrees` -> `30^\\circ`; inside a trigonometric
                 function's argument, radians: `\\sin 20^\\circ` -> `\\sin(\\frac{20\\pi}{180})`
    infinity     "infinitely many" (alone, in \\text or with "solutions") -> `\\infty`
    pmatrix      a one-column `pmatrix`/`bmatrix` -> the tuple of its entries
    set-builder  `\\{x \\mid -1 < x < 1\\}` -> `-1 < x < 1` (the interval rule compares it)
    plus-minus   `\\pm` heading or joining a top-level part of a list or set -> both signs as parts
    labels       `\\text{Minimum: } 1` -> `Minimum: 1` (the parts rule matches labels)

Guarantees: pure string work, linear in the answer; text it does not recognise is returned unchanged;
never raises. Not guaranteed: that every spelling of these forms is caught.
"""

from __future__ import annotations

import re

from scalerl.verifiers.math.rules import split_top

_UNICODE = {
    "\u2212": "-", "\u2013": "-", "\u221e": "\\infty ", "\u222a": "\\cup ", "\u2229": "\\cap ", "\u2264": "\\le ",
    "\u2265": "\\ge ", "\u2260": "\\ne ", "\u00d7": "\\times ", "\u00f7": "\\div ", "\u00b7": "\\cdot ",
    "\u22c5": "\\cdot ", "\u03c0": "\\pi ", "\u00b1": "\\pm ", "\u2213": "\\mp ", "\u00b0": "^\\circ ",
    "\u2208": "\\in ", "\u211d": "\\mathbb{R}", "\u2223": "\\mid ",
}
_SUPERSCRIPT = dict(zip("\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079\u207b", "0123456789-"))
_SUPER_RUN = re.compile("[" + "".join(_SUPERSCRIPT) + "]+")
_ORDINAL = re.compile(
    r"(\d)\s*(?:\^\s*\{\s*(?:\\(?:mathrm|text|textrm|rm)\s*\{\s*)?(?:st|nd|rd|th)\s*\}?\s*\}"
    r"|\^\s*(?:st|nd|rd|th)\b|(?:st|nd|rd|th)\b)")
_DEGREE = re.compile(r"(?:\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\degree\b|\\text\{\s*degrees?\s*\}|\s+degrees?\b)")
_TRIG = re.compile(r"\\(?:sin|cos|tan|cot|sec|csc)(?![a-zA-Z])")
_TRIG_DEGREES = re.compile(
    r"(\\(?:sin|cos|tan|cot|sec|csc)(?:\^\{?\d\}?)?\s*)(?:\(\s*(\d+(?:\.\d+)?)\s*\^\\circ\s*\)|(\d+(?:\.\d+)?)\s*\^\\circ)")
_INFINITE = re.compile(
    r"^(?:\\text\{\s*)?(?:there\s+are\s+)?infinitely\s+many(?:\s+(?:solutions|values|ways|pairs|integers))?"
    r"\.?\s*\}?$|^(?:\\text\{\s*)?infinite(?:ly\s+many)?\s*\}?$", re.IGNORECASE)
_COLUMN = re.compile(r"^\\begin\{([pb])matrix\}(.*)\\end\{\1matrix\}$", re.DOTALL)
_SET_BUILDER = re.compile(
    r"^\\?\{\s*([a-zA-Z])\s*(?:\\in\s*\\mathbb\s*\{?R\}?)?\s*(?:\\mid|\||:|\\colon)\s*(.+?)\s*\\?\}$", re.DOTALL)
_TEXT_LABEL = re.compile(
    r"\\text\{\s*([A-Za-z][A-Za-z ]{0,30}?)\s*:\s*\}\s*|\\text\{\s*([A-Za-z][A-Za-z ]{0,30}?)\s*\}\s*:\s*")


def normalize(text: str) -> str:
    """`text` with the spellings above rewritten; unchanged when none applies."""
    out = text.strip()
    if out.isascii() and "\\" not in out and not re.search(r"[a-z]", out):
        return out  # plain numbers and lists: nothing to rewrite
    out = _unicode(out)
    out = _braced_fracs(out)
    out = _ORDINAL.sub(r"\1", out)
    out = _DEGREE.sub(r"^\\circ", out)
    if _TRIG.search(out):
        out = _TRIG_DEGREES.sub(lambda m: f"{m.group(1)}(\\frac{{{m.group(2) or m.group(3)}\\pi}}{{180}})", out)
    out = _TEXT_LABEL.sub(lambda m: (m.group(1) or m.group(2)) + ": ", out)
    if _INFINITE.match(out):
        return "\\infty"
    out = _column(out)
    builder = _SET_BUILDER.match(out)
    if builder and builder.group(1) in builder.group(2):
        out = builder.group(2)
    return _expand_pm(out)


def _unicode(text: str) -> str:
    if text.isascii():
        return text
    text = _SUPER_RUN.sub(lambda m: "^{" + "".join(_SUPERSCRIPT[c] for c in m.group()) + "}", text)
    text = text.replace("+\u221e", "\u221e")
    text = _sqrt_signs(text)
    return re.sub(r" +", " ", "".join(_UNICODE.get(ch, ch) for ch in text)).strip()


def _group_end(text: str, start: int) -> int:
    """End (exclusive) of the argument starting at `start`: a balanced group, a digit run, a command
    or one character; `start` itself when there is none."""
    if start >= len(text):
        return start
    pairs = {"{": "}", "(": ")", "[": "]"}
    if text[start] in pairs:
        depth = 0
        for k in range(start, len(text)):
            depth += (text[k] == text[start]) - (text[k] == pairs[text[start]])
            if depth == 0:
                return k + 1
        return start
    match = re.compile(r"\d+(?:\.\d+)?|\\[a-zA-Z]+|[a-zA-Z]").match(text, start)
    return match.end() if match else start


def _sqrt_signs(text: str) -> str:
    while "\u221a" in text:
        at = text.index("\u221a")
        start = at + 1
        while start < len(text) and text[start] == " ":
            start += 1
        end = _group_end(text, start)
        arg = text[start:end]
        if arg[:1] in "({[" and arg:
            arg = arg[1:-1]
        text = f"{text[:at]}\\sqrt{{{arg}}}{text[end:]}" if arg else text[:at] + "\\sqrt" + text[at + 1:]
    return text


def _braced_fracs(text: str) -> str:
    """`\\frac{1+a}c` -> `\\frac{1+a}{c}`: math-verify reads `\\frac12` but not a brace on one side only."""
    out, pos = [], 0
    for match in re.finditer(r"\\[dt]?frac(?![a-zA-Z])", text):
        if match.start() < pos:
            continue
        out.append(text[pos:match.end()])
        args, k = [], match.end()
        for _ in range(2):
            while k < len(text) and text[k] == " ":
                k += 1
            end = k + 1 if k < len(text) and text[k].isdigit() else _group_end(text, k)
            if end == k or text[k] in "([":
                break
            args.append(text[k:end] if text[k] == "{" else "{" + text[k:end] + "}")
            k = end
        if len(args) == 2:
            out.append("".join(args))
            pos = k
        else:
            pos = match.end()
    out.append(text[pos:])
    return "".join(out)


def _column(text: str) -> str:
    match = _COLUMN.match(text)
    if match is None or "&" in match.group(2):
        return text
    rows = [r.strip() for r in match.group(2).split("\\\\") if r.strip()]
    return "(" + ", ".join(rows) + ")" if len(rows) >= 2 else text


def _expand_pm(text: str) -> str:
    if "\\pm" not in text:
        return text
    inner, wrap = text, ("", "")
    if text.startswith("\\{") and text.endswith("\\}"):
        inner, wrap = text[2:-2], ("\\{", "\\}")
    parts = split_top(inner)
    expanded = []
    for part in parts:
        both = _both_signs(part)
        if both is None:
            return text  # a `\\pm` inside brackets or more than one: math-verify's own reading
        expanded.extend(both)
    if len(expanded) == len(parts):
        return text
    return wrap[0] + ", ".join(expanded) + wrap[1]


def _both_signs(part: str) -> list[str] | None:
    pieces = part.split("\\pm")
    if len(pieces) == 1:
        return [part]
    if len(pieces) != 2 or any(ch in pieces[1] for ch in "=<>"):
        return None
    head, tail = pieces[0].strip(), pieces[1].strip()
    depth = sum((ch in "([{") - (ch in ")]}") for ch in head)
    if depth != 0 or not tail:
        return None
    label = re.match(r"^([a-zA-Z](?:_\{?\w+\}?)?\s*=)\s*(.*)$", head)
    prefix, head = (label.group(1) + " ", label.group(2)) if label else ("", head)
    if not head:
        return [f"{prefix}{tail}", f"{prefix}-{tail}"]
    return [f"{prefix}{head} + {tail}", f"{prefix}{head} - {tail}"]
