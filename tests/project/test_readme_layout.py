"""The README's Layout tree matches the repository: every folder it names exists, and it names every
top-level folder and every subpackage of the four packages (one level down)."""

from __future__ import annotations

import re
import subprocess

from scalerl.env.contracts.paths import REPO

PACKAGES = ("scalerl_env", "verifiers", "curriculum", "trainer")
ENTRY = re.compile(r"^( *)([\w.-]+)/\s")


def layout_block(readme: str) -> list[str]:
    section = readme.split("\n## Layout\n", 1)[1]
    return section.split("```", 2)[1].strip("\n").splitlines()


def listed_folders(lines: list[str]) -> set[str]:
    """Folder paths of the tree, nesting by two spaces of indentation."""
    stack: list[str] = []
    found = set()
    for line in lines:
        m = ENTRY.match(line)
        if not m:
            continue
        depth = len(m.group(1)) // 2
        stack = stack[:depth] + [m.group(2)]
        found.add("/".join(stack))
    return found


def expected_folders() -> set[str]:
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    tops = {line.split("/")[0] for line in tracked.splitlines() if "/" in line and not line.startswith(".")}
    subpackages = {f"{pkg}/{init.parent.name}" for pkg in PACKAGES
                   for init in (REPO / pkg).glob("*/__init__.py")}
    return tops | subpackages


def test_the_layout_tree_names_only_folders_that_exist():
    listed = listed_folders(layout_block((REPO / "README.md").read_text()))
    assert len(listed) > 20
    assert sorted(p for p in listed if not (REPO / p).is_dir()) == []


def test_the_layout_tree_names_every_top_level_folder_and_subpackage():
    listed = listed_folders(layout_block((REPO / "README.md").read_text()))
    assert sorted(expected_folders() - listed) == []


def test_the_parser_nests_by_indentation():
    lines = ["a/   x", "  b/   y", "    c/  z", "d/  w"]
    assert listed_folders(lines) == {"a", "a/b", "a/b/c", "d"}
