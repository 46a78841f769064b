"""Code extraction from a completion: the last fenced Python block, else the whole completion
(`python_block`: the last Python-tagged block only). With an `entry_point` (function tests), the last
block that defines it, when one does: a solution followed by a usage block (`print(g("ab"))`) runs the
solution, not the usage block alone (which fails with NameError: a correct answer rejected).

Guarantees: never raises; the result is stripped and cut to `max_chars`. A fence is ```python, ```py
or ```python3 (any case); a final block whose closing fence was cut off (truncated generation) counts.
Bare ``` fences count only when the completion has no Python-tagged fence. Empty → "" (no_answer).
Not guaranteed: a solution split over blocks (a helper defined in another block than the entry point)
runs only its entry point's block.
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


def extract_code(completion: str, max_chars: int = 100_000, entry_point: str | None = None) -> str:
    """The program to run, or "" when there is none; with `entry_point`, the last block defining it
    (`def NAME(` or `async def NAME(` at a line start), else the last block."""
    blocks = _TAGGED.findall(completion)
    if not blocks:
        blocks = _BARE.findall(completion)
    if entry_point and blocks:
        defines = re.compile(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(entry_point)}[ \t]*\(", re.MULTILINE)
        blocks = [b for b in blocks if defines.search(b)] or blocks
    code = blocks[-1] if blocks else completion
    return code.strip("\n").rstrip()[:max_chars] if code.strip() else ""
