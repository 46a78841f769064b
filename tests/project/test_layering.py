"""The import graph of the project: no cycles between modules, and no import of a higher layer.

Every `import` in every module is read with `ast`, imports inside functions included (a cycle closed
by a function-level import is still a cycle). Layers, lowest first:
`scalerl_env.contracts.records` / `scalerl_env.contracts.config` (contracts: import no other project module) →
`verifiers`, `curriculum` → the rest of `scalerl_env` → `trainer`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scalerl_env.contracts.paths import REPO

PACKAGES = ("scalerl_env", "verifiers", "curriculum", "trainer")
CONTRACTS = "scalerl_env.contracts"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules(root: Path) -> dict[str, Path]:
    return {module_name(p, root): p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Project modules `name` imports (a `from pkg import sub` names the submodule when it is one)."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_pkg else 0)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:  # `import a.b.c` of a package path: the longest known prefix
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = project_modules(root)
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a list of modules (first == last), or None. Package `__init__` edges to their own
    submodules are ignored (a package re-exporting its parts is not a cycle of behaviour)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt.startswith(node + "."):
                continue
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def layer(module: str) -> int:
    if module == CONTRACTS or module.startswith(CONTRACTS + "."):
        return 0
    top = module.split(".")[0]
    return {"verifiers": 1, "curriculum": 1, "scalerl_env": 2, "trainer": 3}[top]


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for src, targets in graph.items():
        for dst in targets:
            if layer(src) == 0 and layer(dst) != 0:
                bad.append(f"{src} (a contract module) imports {dst}")
            elif layer(dst) > layer(src) and not (src == "scalerl_env" or dst.startswith(src + ".")):
                bad.append(f"{src} imports the higher layer {dst}")
    return sorted(bad)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(REPO)


def test_the_project_has_no_import_cycle(graph):
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_no_module_imports_a_higher_layer(graph):
    assert layering_violations(graph) == []


def test_a_planted_cycle_and_a_planted_upward_import_are_found(tmp_path):
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "trainer" / "a.py").write_text("def f():\n    from trainer.b import g\n")
    (tmp_path / "trainer" / "b.py").write_text("from trainer import a\n")
    (tmp_path / "verifiers" / "x.py").write_text("def f():\n    import trainer.a\n")
    (tmp_path / "scalerl_env" / "contracts").mkdir()
    (tmp_path / "scalerl_env" / "contracts" / "records.py").write_text("from scalerl_env import sources\n")
    (tmp_path / "scalerl_env" / "sources.py").write_text("")
    planted = import_graph(tmp_path)
    assert set(find_cycle(planted) or []) == {"trainer.a", "trainer.b"}
    assert layering_violations(planted) == [
        "scalerl_env.contracts.records (a contract module) imports scalerl_env.sources",
        "verifiers.x imports the higher layer trainer.a",
    ]
