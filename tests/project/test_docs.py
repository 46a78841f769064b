"""The docs name only what exists, and the module map lists every module.

- Every `package/path.py` file path and every dotted `package.module[.attr]` name in `README.md` and the
  docs in `CHECKED_DOCS` exists (a dotted name's first part that is
  not a module must be defined at the top level of the module before it).
- `docs/modules.md` has one line for every module of the four packages, and no line for a module
  that is not there.
- No file of the repository cites the developers' notes that live outside it.
"""

from __future__ import annotations

import ast
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest
from scalerl.env.contracts.paths import REPO

PACKAGES = ("scalerl_env", "verifiers", "curriculum", "trainer")
CHECKED_DOCS = ("docs/design.md", "docs/modules.md", "docs/development.md", "README.md", "docs/train.md",
                "docs/trainer_core.md", "docs/fit.md", "docs/vllm_ray.md", "docs/data.md")
TOP = "scalerl_env|verifiers|curriculum|trainer|tests|benchmarks|examples|datasets"
FILE_PATH = re.compile(rf"(?<![\w./-])((?:{TOP})/[\w./-]*\.(?:py|sh|yaml|jsonl|json))\b")
DOTTED = re.compile(r"(?<![\w./-])((?:scalerl\.(?:env|verifiers|curriculum|trainer))(?:\.\w+)+)")
# The folder each installed package lives in (pyproject's [tool.setuptools.package-dir]).
FOLDER_OF = {"scalerl.env": "scalerl_env", "scalerl.verifiers": "verifiers", "scalerl.curriculum": "curriculum",
             "scalerl.trainer": "trainer"}
# A module named by its folder (`verifiers.batch`) is not importable once installed: the docs use `scalerl.*`.
FOLDER_DOTTED = re.compile(r"(?<![\w./-])((?:scalerl_env|verifiers|curriculum|trainer)\.[a-z_]\w*(?:\.\w+)*)")
FILE_SUFFIXES = {"md", "py", "yaml", "json", "jsonl", "sh", "png", "csv", "parquet", "toml"}
MAP_LINE = re.compile(r"^- `([^`]+\.py)`", re.M)


def package_modules(root: Path = REPO) -> set[str]:
    """Every module file of the four packages, as a repository-relative path (an empty `__init__.py`
    is not a module worth a line)."""
    return {p.relative_to(root).as_posix() for pkg in PACKAGES for p in (root / pkg).rglob("*.py")
            if "__pycache__" not in p.parts and (p.name != "__init__.py" or p.read_text().strip())}


@cache
def top_level_names(path: Path) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            if "__all__" in names and isinstance(node.value, (ast.List, ast.Tuple)):  # lazy exports
                names.update(e.value for e in node.value.elts if isinstance(e, ast.Constant))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def dotted_problem(name: str, root: Path = REPO) -> str | None:
    """Why `name` (e.g. `scalerl.trainer.core.update.PolicyTrainer`) names nothing, or None when it exists."""
    parts = name.split(".")
    parts = [".".join(parts[:2]), *parts[2:]]
    path = root / FOLDER_OF[parts[0]]
    for i, part in enumerate(parts[1:], start=1):
        if path.is_dir() and (path / part).is_dir():
            path = path / part
        elif path.is_dir() and (path / f"{part}.py").is_file():
            path = path / f"{part}.py"
        else:
            module = path / "__init__.py" if path.is_dir() else path
            if part in top_level_names(module):
                return None
            return (f"{'.'.join(parts[:i + 1])}: no such module or top-level name in "
                    f"{module.relative_to(root).as_posix()}")
    return None


def named_paths(text: str) -> set[str]:
    return {m.rstrip(".") for m in FILE_PATH.findall(text)}


def named_dotted(text: str) -> set[str]:
    """Dotted module names; a file name such as `curriculum.md` and a config override such as
    `curriculum.priority.mode=learnability` are not."""
    names = {m.group(1).rstrip(".") for m in DOTTED.finditer(text) if not text.startswith("=", m.end())}
    return {n for n in names if n.rpartition(".")[2] not in FILE_SUFFIXES}


def doc_problems(doc: str, root: Path = REPO) -> list[str]:
    text = (root / doc).read_text()
    bad = [f"{doc}: {p} does not exist" for p in sorted(named_paths(text)) if not (root / p).exists()]
    bad += [f"{doc}: {why}" for n in sorted(named_dotted(text)) if (why := dotted_problem(n, root))]
    bad += [f"{doc}: {n} is a folder's name; the installed module is scalerl.{n.replace('scalerl_env', 'env')}"
            for n in sorted(folder_dotted(text, root))]
    return bad


def folder_dotted(text: str, root: Path = REPO) -> set[str]:
    """Dotted names that start with a repository folder and resolve to a module file there."""
    found = set()
    for m in FOLDER_DOTTED.finditer(text):
        top, _, rest = m.group(1).partition(".")
        first = rest.split(".")[0]
        if (root / top / first).is_dir() or (root / top / f"{first}.py").is_file():
            found.add(m.group(1).rstrip("."))
    return {n for n in found if n.rpartition(".")[2] not in FILE_SUFFIXES}


def module_map_problems(root: Path = REPO) -> list[str]:
    listed = set(MAP_LINE.findall((root / "docs/modules.md").read_text()))
    listed = {p for p in listed if p.split("/")[0] in PACKAGES}
    actual = package_modules(root)
    return ([f"docs/modules.md has no line for {p}" for p in sorted(actual - listed)]
            + [f"docs/modules.md lists {p}, which does not exist" for p in sorted(listed - actual)])


@pytest.mark.parametrize("doc", CHECKED_DOCS)
def test_every_module_and_file_a_doc_names_exists(doc):
    assert doc_problems(doc) == []


def test_design_names_the_phases_of_one_step():
    design = (REPO / "docs/design.md").read_text()
    loop = top_level_names(REPO / "trainer/run/loop.py")
    phases = [a or b for a, b in re.findall(r"^ (\w+) \.{4,}|^\s+→ (\w+) \.+", design, re.M)]
    assert phases[:2] == ["sample_groups", "record_attempts"], phases
    assert [p for p in phases if p not in loop] == []


def test_the_module_map_lists_every_module():
    assert module_map_problems() == []


def test_the_checks_find_a_missing_module_and_a_missing_name(tmp_path):
    (tmp_path / "trainer" / "core").mkdir(parents=True)
    (tmp_path / "trainer" / "__init__.py").write_text('"""The trainer."""\n')
    (tmp_path / "trainer" / "core" / "__init__.py").write_text("")
    (tmp_path / "trainer" / "core" / "update.py").write_text("class PolicyTrainer:\n    pass\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "design.md").write_text(
        "`trainer/core/update.py`, `scalerl.trainer.core.update.PolicyTrainer.step`, `trainer/core/policy.py`,\n"
        "`scalerl.trainer.core.losses`, `scalerl.trainer.core.update.pack`; `trainer.pipeline.k=4` is an override.\n")
    (tmp_path / "docs" / "modules.md").write_text("- `trainer/core/update.py` — x\n- `trainer/gone.py` — y\n")
    assert doc_problems("docs/design.md", tmp_path) == [
        "docs/design.md: trainer/core/policy.py does not exist",
        "docs/design.md: scalerl.trainer.core.losses: no such module or top-level name in trainer/core/__init__.py",
        "docs/design.md: scalerl.trainer.core.update.pack: no such module or top-level name in trainer/core/update.py",
    ]
    assert module_map_problems(tmp_path) == [
        "docs/modules.md has no line for trainer/__init__.py",
        "docs/modules.md lists trainer/gone.py, which does not exist",
    ]


def test_no_file_cites_a_file_outside_the_repository():
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    # The names are assembled so that this file does not itself cite them.
    notes, design = "sha" + "red", "DES" + "IGN"
    outside = re.compile(rf"{design}\.md|(?<![\w/])\.\./{notes}/|(?<![\w./]){notes}/(?:notes|reference)/")
    bad = []
    for rel in files.split():
        path = REPO / rel
        if rel.startswith("datasets/reference/") and rel.count("/") > 2:
            continue  # vendored material: its provenance READMEs name upstream paths
        if path.suffix not in {".py", ".md", ".json", ".yaml", ".sh", ".toml"}:
            continue
        if not path.is_file():
            continue
        bad += [f"{rel}:{i}" for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
                if outside.search(line)]
    assert bad == []
