"""Code extraction from a completion: the last fenced Python block, else the whole completion
(`python_block`: the last Python-tagged block only).

Guarantees: never raises; the result is stripped and cut to `max_chars`. A fence is ```python, ```py
or ```python3 (any case); a final block whose closing fence was cut off (truncated generation) counts.
Bare ``` fences count only when the completion has no Python-tagged fence. Empty → "" (no_answer).
"""

from __future__ import annotations

import re

_TAGGED = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\r?\n(.*?)(?:```|\Z)", re.IGNORECASE | re.DOTALL)
_BARE = re.compile(r"```[ \t]*\r?\n(.*?)(?:```|\Z)", re.DOTALL)


def python_block(text: str) -> str | None:
    """The last ```python (```py, ```python3) block of `text`, or None when it has none; bare fences and
    unfenced text do not count (for environments where fenced Python is a tool call)."""
    blocks = _TAGGED.findall(text)
    return blocks[-1] if blocks else None


def extract_code(completion: str, max_chars: int = 100_000) -> str:
    """The program to run, or "" when there is none."""
    blocks = _TAGGED.findall(completion)
    if not blocks:
        blocks = _BARE.findall(completion)
    code = blocks[-1] if blocks else completion
    return code.strip("\n").rstrip()[:max_chars] if code.strip() else ""
