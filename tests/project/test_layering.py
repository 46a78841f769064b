"""The import graph of the project: no cycles between modules, and no import of a higher layer.

Every module of the four packages and of `benchmarks/`, `examples/` and `tests/support/` is read with
`ast`. An edge is any of:
- an `import` or `from ... import`, at module level or inside a function (a cycle closed by a
  function-level import is still a cycle), relative imports resolved, `from pkg import sub` naming
  the submodule;
- a string that names a project module: `importlib.import_module("trainer.x")`, `__import__`,
  `[sys.executable, "-m", "trainer.x"]`, a `"module:function"` builder, a list of command modules.

Package `__init__` modules are modules like any other: `__init__` importing its submodules is an edge,
so a submodule that imports its package's `__init__` while the `__init__` re-exports it is a cycle.
The layers are `LAYERS` below, lowest first; docs/design.md shows the same table. A module may import
its own group and any lower layer; groups of one rank (siblings) do not import each other.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from scalerl.env.contracts.paths import REPO

ROOTS = ("scalerl_env", "verifiers", "curriculum", "trainer", "benchmarks", "examples", "tests/support")

# (rank, group, module prefixes): lowest first. A module belongs to the group of its longest prefix.
LAYERS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (0, "contracts", ("scalerl.env.contracts",)),
    (1, "verifiers", ("scalerl.verifiers",)),
    (1, "curriculum", ("scalerl.curriculum",)),
    (2, "environment", ("scalerl.env",)),
    (3, "trainer core", ("scalerl.trainer.core", "scalerl.trainer.tiny", "scalerl.trainer.engines.base")),
    (4, "trainer parts", ("scalerl.trainer", "scalerl.trainer.config", "scalerl.trainer.engines",
                          "scalerl.trainer.rollout", "scalerl.trainer.distributed", "scalerl.trainer.memory")),
    (5, "trainer run", ("scalerl.trainer.run", "scalerl.trainer.fit")),
    (6, "trainer studies", ("scalerl.trainer.ablate",)),
    (7, "trainer commands", ("scalerl.trainer.commands", "scalerl.trainer.cli")),
    (8, "tools", ("benchmarks", "examples", "tests.support")),
)
MODULE_STRING = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*(:[A-Za-z_][A-Za-z0-9_]*)?$")


# The repository's folders and the names they install under (pyproject's [tool.setuptools.package-dir]).
INSTALLED_AS = {"scalerl_env": "scalerl.env", "verifiers": "scalerl.verifiers", "curriculum": "scalerl.curriculum",
                "trainer": "scalerl.trainer"}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    parts = parts[:-1] if parts[-1] == "__init__" else parts
    return ".".join([INSTALLED_AS.get(parts[0], parts[0]), *parts[1:]])


def project_modules(root: Path) -> dict[str, Path]:
    return {module_name(p, root): p for top in ROOTS if (root / top).is_dir()
            for p in sorted((root / top).rglob("*.py"))}


def _longest_known(target: str, known: set[str]) -> str:
    while target and target not in known:  # `import a.b.c` of a package path: the longest known prefix
        target = target.rpartition(".")[0]
    return target


def _import_targets(node: ast.AST, name: str, is_pkg: bool, known: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = name.split(".")
            anchor = parts[: len(parts) - node.level + (1 if is_pkg else 0)]
            base = ".".join(anchor + ([base] if base else []))
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_STRING.match(node.value):
        target = node.value.partition(":")[0]
        return [target] if target in known else []  # only an exact module name: prose never matches
    return []


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Project modules `name` imports, by statement or by string (see the module docstring)."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        for target in _import_targets(node, name, is_pkg, known):
            target = _longest_known(target, known)
            if target and target != name:
                out.add(target)
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = project_modules(root)
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
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


def group_of(module: str) -> tuple[int, str]:
    best: tuple[int, int, str] | None = None
    for rank, group, prefixes in LAYERS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), rank, group)
    if best is None:
        raise KeyError(f"{module} is in no layer of LAYERS")
    return best[1], best[2]


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for src, targets in graph.items():
        (src_rank, src_group) = group_of(src)
        for dst in sorted(targets):
            dst_rank, dst_group = group_of(dst)
            if dst_rank > src_rank:
                bad.append(f"{src} ({src_group}) imports the higher layer {dst} ({dst_group})")
            elif dst_rank == src_rank and dst_group != src_group:
                bad.append(f"{src} ({src_group}) imports its sibling {dst} ({dst_group})")
    return sorted(bad)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(REPO)


def test_the_project_has_no_import_cycle(graph):
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_no_module_imports_a_higher_layer(graph):
    assert layering_violations(graph) == []


def test_the_design_doc_shows_the_layers_of_this_test():
    text = (REPO / "docs" / "design.md").read_text()
    for rank, group, prefixes in LAYERS:
        row = f"| {rank} | {group} | " + ", ".join(f"`{p}`" for p in prefixes) + " |"
        assert row in text, f"docs/design.md lacks the layer row {row!r}"


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        for parent in path.relative_to(root).parents:  # every folder a package
            if str(parent) != "." and not (root / parent / "__init__.py").exists():
                (root / parent / "__init__.py").write_text("")
    return root


PLANTED = {
    "scalerl_env/__init__.py": "import scalerl.trainer\n",
    "scalerl_env/contracts/records.py": "",
    "scalerl_env/server/app.py": 'BUILDER = "scalerl.trainer.run.loop:train"\n',
    "verifiers/__init__.py": "from scalerl.verifiers.pool import Pool\n",
    "verifiers/pool.py": "def Pool():\n    from scalerl.verifiers import helpers\n",
    "verifiers/dyn.py": ('import importlib\n\ndef f():\n'
                         '    return importlib.import_module("scalerl.trainer.run.loop")\n'),
    "verifiers/peer.py": "from scalerl.curriculum import sampler\n",
    "curriculum/sampler.py": "",
    "curriculum/spawn.py": 'import sys\nCMD = [sys.executable, "-m", "scalerl.trainer.run.loop"]\n',
    "trainer/run/loop.py": "",
    "trainer/commands/train.py": "",
    "trainer/ablate/study.py": "from scalerl.trainer.commands.train import build_config\n",
    "trainer/distributed/launch.py": "def go():\n    from scalerl.trainer.run.loop import train\n",
    "trainer/engines/load.py": "import benchmarks.bench\n",
    "benchmarks/bench.py": "",
    "tests/support/a.py": "from tests.support import b\n",
    "tests/support/b.py": "from tests.support import a\n",
}


def test_every_planted_case_is_found(tmp_path):
    planted = import_graph(_tree(tmp_path, PLANTED))
    found = layering_violations(planted)
    expected = [
        "scalerl.curriculum.spawn (curriculum) imports the higher layer scalerl.trainer.run.loop (trainer run)",
        "scalerl.env (environment) imports the higher layer scalerl.trainer (trainer parts)",
        "scalerl.env.server.app (environment) imports the higher layer scalerl.trainer.run.loop (trainer run)",
        "scalerl.trainer.ablate.study (trainer studies) imports the higher layer scalerl.trainer.commands.train"
        " (trainer commands)",
        "scalerl.trainer.distributed.launch (trainer parts) imports the higher layer scalerl.trainer.run.loop"
        " (trainer run)",
        "scalerl.trainer.engines.load (trainer parts) imports the higher layer benchmarks.bench (tools)",
        "scalerl.verifiers.dyn (verifiers) imports the higher layer scalerl.trainer.run.loop (trainer run)",
        "scalerl.verifiers.peer (verifiers) imports its sibling scalerl.curriculum.sampler (curriculum)",
    ]
    assert found == expected
    cycle = find_cycle(planted)
    assert set(cycle or []) in ({"scalerl.verifiers", "scalerl.verifiers.pool"}, {"tests.support.a", "tests.support.b"})
    del planted["scalerl.verifiers"]  # the other planted cycle is found too
    assert set(find_cycle(planted) or []) == {"tests.support.a", "tests.support.b"}


def test_prose_naming_a_module_is_not_an_import(tmp_path):
    planted = import_graph(_tree(tmp_path, {
        "verifiers/x.py": ('"""Scored by scalerl.trainer.run.loop (see there)."""\n'
                           'MSG = "see scalerl.trainer.run.loop for why"\n'),
        "trainer/run/loop.py": ""}))
    assert planted["scalerl.verifiers.x"] == set()


OLD_TOP_LEVEL = re.compile(r"^\s*(?:from|import)\s+(" + "|".join(INSTALLED_AS) + r")\b", re.MULTILINE)


def test_no_module_imports_a_folder_name_instead_of_its_installed_name():
    """`verifiers` and `trainer` are other projects' import names: the project imports only `scalerl.*`."""
    tops = (*ROOTS, "tests")
    bad = [f"{p.relative_to(REPO)}: {m.group(0).strip()}" for top in tops for p in sorted((REPO / top).rglob("*.py"))
           for m in OLD_TOP_LEVEL.finditer(p.read_text())]
    assert bad == []
