"""Every `# noqa: CODE` in the repository names a rule ruff checks in that file.

A rule is checked when pyproject's `[tool.ruff.lint] select` selects it (by linter prefix: `B` selects
`B008`, not `BLE001`) and neither `ignore` nor a matching `per-file-ignores` entry turns it off. A noqa
for any other rule suppresses nothing and misleads the reader. Not checked: whether a checked rule's
noqa is still needed (`ruff check --extend-select RUF100` says so).
"""

from __future__ import annotations

import fnmatch
import io
import re
import tokenize
from pathlib import Path

from scalerl.env.contracts.paths import REPO

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own dependency
    import tomli as tomllib

NOQA = re.compile(r"#\s*noqa:\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)", re.I)
CODE = re.compile(r"([A-Z]+)([0-9]*)")
SKIPPED_DIRS = {"node_modules", "runs", "__pycache__"}


def ruff_lint() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]


def matches(selector: str, code: str) -> bool:
    """Ruff's selector semantics: same linter prefix (the letters), then the selector's digits as a prefix."""
    (sel_letters, sel_digits), (letters, digits) = CODE.fullmatch(selector).groups(), CODE.fullmatch(code).groups()
    return sel_letters == letters and digits.startswith(sel_digits)


def checked(code: str, path: str, lint: dict) -> bool:
    off = list(lint.get("ignore", []))
    off += [c for pattern, codes in lint.get("per-file-ignores", {}).items() if fnmatch.fnmatch(path, pattern)
            for c in codes]
    return any(matches(s, code) for s in lint["select"]) and not any(matches(s, code) for s in off)


def noqa_codes(text: str) -> list[tuple[int, str]]:
    """(line, code) of every code named in a `# noqa:` comment (comments only, not strings)."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT and (m := NOQA.search(token.string)):
            found += [(token.start[0], c.strip().upper()) for c in m["codes"].split(",")]
    return found


def python_files(root: Path = REPO) -> list[Path]:
    return [p for p in sorted(root.rglob("*.py"))
            if not any(part.startswith(".") or part in SKIPPED_DIRS for part in p.relative_to(root).parts)]


def unchecked_noqa(root: Path = REPO) -> list[str]:
    lint = ruff_lint()
    return [f"{path}:{line}: noqa {code}" for p in python_files(root) for path in [p.relative_to(root).as_posix()]
            for line, code in noqa_codes(p.read_text()) if not checked(code, path, lint)]


def test_selector_semantics():
    assert matches("B", "B008") and not matches("B", "BLE001") and matches("E4", "E402") and not matches("E5", "E402")
    lint = {"select": ["E", "B"], "ignore": ["B008"], "per-file-ignores": {"benchmarks/*.py": ["E402"]}}
    assert checked("E402", "trainer/x.py", lint) and not checked("E402", "benchmarks/x.py", lint)
    assert not checked("B008", "trainer/x.py", lint) and not checked("SIM115", "trainer/x.py", lint)


def test_noqa_comments_are_found_in_comments_only():
    text = 's = "# "\nx = 1  # noqa: BLE001, e402 - why\n'
    assert noqa_codes(text) == [(2, "BLE001"), (2, "E402")]


def test_every_noqa_names_a_checked_rule():
    assert unchecked_noqa() == []
