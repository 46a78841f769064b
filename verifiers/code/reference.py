"""A bare code reference (what a reward adapter or a dataset column hands over) read as tests and limits.

Forms: a test spec `{"kind": "stdio" | "functional" | "assert", ...}`, `{"tests": {...}, "limits": {...}}`,
or the APPS/TACO stdio form `{"inputs": ["1 2\\n", ...], "outputs": ["3\\n", ...]}`; each as a dict or its
JSON text. `code_spec` says whether a reference is one (the code domain's `claims_reference`);
`tests_and_limits` validates it.

References usually come from dataset columns (HF `datasets`, parquet), which do not hand back what was
written: a struct column gives every row every field of the column, `None` where the row had none.
`code_spec` therefore drops `None`-valued spec fields (the spec, `tests`, `limits`, each case and its
`kwargs`); values inside `args` and `expected` are data and stay as they are.

Guarantees: `code_spec` never raises; `tests_and_limits` raises ValidationError (a field at fault) or
ValueError (a layout it cannot read). Not here: the text of a math answer that looks like a set
(`"{1, 2}"`) is not JSON and is not claimed.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter
from scalerl.env.contracts.records import CodeTests, Limits

_TESTS = TypeAdapter(CodeTests)


def code_spec(reference: Any) -> dict[str, Any] | None:
    """The code test spec a reference holds (a dict or its JSON text, nulls dropped), or None."""
    if isinstance(reference, str):
        text = reference.strip()
        if not text.startswith("{"):
            return None
        try:
            reference = json.loads(text)
        except json.JSONDecodeError:
            return None  # e.g. a set-valued math answer "{1, 2}"
    if isinstance(reference, dict):
        spec = _without_nulls(reference)
        if {"kind", "tests", "inputs"} & spec.keys():
            return spec
    return None


def tests_and_limits(spec: dict[str, Any]) -> tuple[Any, Limits | None]:
    """The typed tests and limits of a spec `code_spec` returned."""
    limits = Limits.model_validate(spec["limits"]) if spec.get("limits") is not None else None
    if "tests" in spec:
        return _TESTS.validate_python(spec["tests"]), limits
    if "kind" in spec:
        return _TESTS.validate_python({k: v for k, v in spec.items() if k != "limits"}), limits
    inputs, outputs = spec.get("inputs"), spec.get("outputs")
    if spec.get("fn_name"):
        raise ValueError("APPS/TACO call-based tests (fn_name) need the functional form {'kind': 'functional', ...}")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise ValueError("'inputs' and 'outputs' must be lists of equal length")
    cases = [{"input": str(i), "output": str(o)} for i, o in zip(inputs, outputs)]
    return _TESTS.validate_python({"kind": "stdio", "cases": cases}), limits


def _without_nulls(spec: dict[str, Any]) -> dict[str, Any]:
    spec = _drop_nulls(spec)
    for key in ("tests", "limits"):
        if isinstance(spec.get(key), dict):
            spec[key] = _drop_nulls(spec[key])
    tests = spec.get("tests", spec)
    if isinstance(tests, dict) and isinstance(tests.get("cases"), list):
        tests["cases"] = [_case_without_nulls(case) for case in tests["cases"]]
    return spec


def _case_without_nulls(case: Any) -> Any:
    if not isinstance(case, dict):
        return case
    case = _drop_nulls(case)
    if isinstance(case.get("kwargs"), dict):
        case["kwargs"] = _drop_nulls(case["kwargs"])
    return case


def _drop_nulls(mapping: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if v is not None}
