"""No set of domain names is spelled outside the domain specs: every such site reads the registry.

Flagged in project code (`scalerl_env`, `verifiers`, `curriculum`, `trainer`, `benchmarks`, `examples`),
outside `scalerl_env/domains/` (the built-in specs): a list, tuple, set or dict literal holding two or
more built-in domain names, and a comparison of a value with a domain name (`domain == "math"`,
`domain in ("math", ...)`), which is how a site branches on the domain instead of asking its spec.
Reading one domain's own config section (`config.math`, `info["math"]`) is not a set and is allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

from scalerl.env.contracts.domains import domain_names
from scalerl.env.contracts.paths import REPO

ROOTS = ("scalerl_env", "verifiers", "curriculum", "trainer", "benchmarks", "examples")
SPECS = REPO / "scalerl_env" / "domains"


def _names(node: ast.AST, names: set[str]) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and n.value in names]


def literal_sites(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """(line, what) for each domain-set literal and each comparison with a domain name in `tree`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            hits = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names]
            if len(set(hits)) >= 2:
                found.append((node.lineno, f"literal set {sorted(set(hits))}"))
        elif isinstance(node, ast.Dict):
            hits = [k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in names]
            if len(set(hits)) >= 2:
                found.append((node.lineno, f"dict keyed by {sorted(set(hits))}"))
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
                                                   for op in node.ops):
            hits = _names(ast.Tuple(elts=node.comparators), names)
            if hits and not isinstance(node.left, ast.Constant):
                found.append((node.lineno, f"comparison with {sorted(set(hits))}"))
    return found


def violations(root: Path, names: set[str]) -> list[str]:
    out = []
    for top in ROOTS:
        for path in sorted((root / top).rglob("*.py")):
            if SPECS in path.parents:
                continue
            tree = ast.parse(path.read_text(), str(path))
            out += [f"{path.relative_to(root)}:{line}: {what}" for line, what in literal_sites(tree, names)]
    return out


def test_no_domain_set_outside_the_specs():
    assert violations(REPO, set(domain_names())) == []


def test_planted_sets_and_branches_are_found():
    planted = ast.parse('W = {"math": 1, "code": 2}\nD = ["math", "code"]\nif d == "math": pass\n'
                        'ok = cfg["math"]\nif d in ("code",): pass\n')
    assert [line for line, _ in literal_sites(planted, {"math", "code"})] == [1, 2, 3, 5]
