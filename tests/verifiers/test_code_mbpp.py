"""MBPP (sanitized, PRIME's 399) through the real sandbox: every reference program is `correct`, and a
broken variant of every one (its tested functions' results perturbed) is `wrong`.

Limits: 10 s CPU per item (MBPP task 123 alone takes a few seconds of CPU on a loaded 2-core machine).
"""

from __future__ import annotations

import ast
import json
import os
import warnings

import pytest
from scalerl.env.contracts.paths import reference_dir
from scalerl.env.contracts.records import Status, VerifyItem
from scalerl.verifiers.code.converters import from_mbpp
from scalerl.verifiers.code.judge import CodeVerifier

MBPP = os.path.join(reference_dir(), "mbpp_sanitized_prime", "new_mbpp.json")
LIMITS = {"time_s": 10.0}
PERTURB = '''

def __perturb(r):
    if isinstance(r, bool):
        return not r
    if isinstance(r, float):
        return r + 1 + abs(r) / 2
    if isinstance(r, (int, complex)):
        return r + 1
    if isinstance(r, (str, bytes)):
        return r + r[:0].__class__("#")
    if isinstance(r, list):
        return r + [None]
    if isinstance(r, tuple):
        return r + (None,)
    if isinstance(r, (set, frozenset)):
        return r | {"#"}
    if isinstance(r, dict):
        return {**r, "#": None}
    return 0 if r is None else None


def __break(f):
    return lambda *a, **k: __perturb(f(*a, **k))
'''


def load_rows() -> list[dict]:
    with open(MBPP) as f:
        return json.load(f)


def functions_under_test(row: dict) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # MBPP tests hold regexes in plain strings
        warnings.simplefilter("ignore", DeprecationWarning)
        defined = {n.name for n in ast.parse(row["code"]).body if isinstance(n, ast.FunctionDef)}
        called = {n.func.id for t in row["test_list"] for n in ast.walk(ast.parse(t))
                  if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return sorted(defined & called)


def broken(row: dict) -> str:
    return row["code"] + PERTURB + "".join(f"\n{fn} = __break({fn})" for fn in functions_under_test(row))


@pytest.fixture(scope="module")
def verifier():
    with CodeVerifier() as v:
        yield v


def items(rows: list[dict], program) -> list[VerifyItem]:
    return [VerifyItem(id=str(r["task_id"]), domain="code", completion=f"```python\n{program(r)}\n```",
                       tests=from_mbpp(r), limits=LIMITS) for r in rows]


def test_mbpp_has_399_rows_each_with_a_tested_function() -> None:
    rows = load_rows()
    assert len(rows) == 399
    assert all(functions_under_test(r) for r in rows)


def test_all_399_reference_programs_are_correct(verifier: CodeVerifier) -> None:
    verdicts = verifier.verify_many(items(load_rows(), lambda r: r["code"]))
    failures = [(v.id, v.status.value, v.details.get("stderr_tail")) for v in verdicts if v.status != Status.correct]
    assert failures == []


def test_a_broken_variant_of_every_reference_program_is_wrong(verifier: CodeVerifier) -> None:
    verdicts = verifier.verify_many(items(load_rows(), broken))
    passed = [v.id for v in verdicts if v.status == Status.correct]
    assert passed == []
    assert all(v.status == Status.wrong for v in verdicts), {v.id: v.status.value for v in verdicts
                                                             if v.status != Status.wrong}
