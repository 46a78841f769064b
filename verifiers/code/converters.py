"""Converters from common code-benchmark rows to the three test kinds of `scalerl.env.contracts.records`.

Each `from_<format>(row)` takes one dataset row (a dict, as Hugging Face `datasets` yields it) and
returns a `StdioTests`, `FunctionalTests` or `AssertTests`; a malformed row raises ValueError naming
the field. Formats:
- APPS / TACO: `input_output` (JSON string or dict: inputs, outputs, optional fn_name) → functional when
  `fn_name` is present (inputs are argument lists), else stdio (list-of-lines values are joined).
- LiveCodeBench: `public_test_cases` / `private_test_cases` (JSON, or LCB's base64+zlib+pickle
  packing, unpacked with an unpickler that allows no globals), `testtype` stdin|functional; functional
  inputs are one JSON value per line, the function name comes from `metadata.func_name`.
- DeepCoder: `tests` (JSON): an APPS-style dict or a list of {input, output, type/testtype, fn_name}.
- CodeContests: `public_tests`/`private_tests`/`generated_tests` ({input: [...], output: [...]}), or
  SandboxFusion's `test` list of {input: {stdin}, output: {stdout}}.
- HumanEval: `test` defining check(candidate), `entry_point`; the prompt's imports lead the test code
  (the harness runs leading imports before the program) and `check(entry_point)` ends it.
- MBPP: `test_list` asserts preceded by `test_imports`.
Departure: APPS functional outputs are compared with the APPS harness's leniency (a single-element
expected list also matches its element; see `scalerl.verifiers.code.compare`).
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from collections.abc import Callable
from typing import Any

from scalerl.env.contracts.records import AssertTests, FunctionalCase, FunctionalTests, StdioCase, StdioTests


def _field(row: dict, name: str) -> Any:
    if not isinstance(row, dict):
        raise ValueError(f"row must be a mapping, got {type(row).__name__}")  # the converter contract is ValueError
    if name not in row or row[name] is None:
        raise ValueError(f"row has no {name!r}")
    return row[name]


def _json(value: Any, name: str) -> Any:
    if isinstance(value, (str, bytes)):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ValueError(f"{name!r} is not valid JSON: {exc}") from exc
    return value


def _text(value: Any) -> str:
    return "\n".join(map(str, value)) if isinstance(value, list) else str(value)


def _stdio(inputs: list, outputs: list, name: str) -> StdioTests:
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise ValueError(f"{name!r}: inputs and outputs must be lists of equal length")
    if not inputs:
        raise ValueError(f"{name!r} has no test cases")
    return StdioTests(cases=[StdioCase(input=_text(i), output=_text(o)) for i, o in zip(inputs, outputs)])


def _functional(fn_name: str, args_list: list, outputs: list, name: str) -> FunctionalTests:
    if not isinstance(args_list, list) or not isinstance(outputs, list) or len(args_list) != len(outputs):
        raise ValueError(f"{name!r}: inputs and outputs must be lists of equal length")
    if not args_list:
        raise ValueError(f"{name!r} has no test cases")
    cases = [FunctionalCase(args=a if isinstance(a, list) else [a], expected=o) for a, o in zip(args_list, outputs)]
    return FunctionalTests(entry_point=str(fn_name), cases=cases)


def from_apps(row: dict) -> StdioTests | FunctionalTests:
    io_ = _json(_field(row, "input_output"), "input_output")
    if not isinstance(io_, dict) or "inputs" not in io_ or "outputs" not in io_:
        raise ValueError("'input_output' needs 'inputs' and 'outputs'")
    fn_name = io_.get("fn_name") or row.get("fn_name")
    if fn_name:
        return _functional(fn_name, io_["inputs"], io_["outputs"], "input_output")
    return _stdio(io_["inputs"], io_["outputs"], "input_output")


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _lcb_cases(value: Any, name: str) -> list:
    if isinstance(value, str) and value.strip()[:1] not in ("[", ""):
        try:
            raw = zlib.decompress(base64.b64decode(value))
            value = _NoGlobals(io.BytesIO(raw)).load()
        except (ValueError, zlib.error, pickle.UnpicklingError, EOFError) as exc:
            raise ValueError(f"{name!r} is neither JSON nor LiveCodeBench's packed form: {exc}") from exc
    cases = _json(value, name) if value != "" else []
    if not isinstance(cases, list):
        raise ValueError(f"{name!r} must be a list of test cases")  # the converter contract is ValueError
    return cases


def _lines_as_args(text: str) -> list:
    return [json.loads(line) for line in str(text).split("\n") if line.strip()]


def from_livecodebench(row: dict) -> StdioTests | FunctionalTests:
    cases = _lcb_cases(_field(row, "public_test_cases"), "public_test_cases")
    if row.get("private_test_cases"):
        cases += _lcb_cases(row["private_test_cases"], "private_test_cases")
    if not cases:
        raise ValueError("'public_test_cases' and 'private_test_cases' hold no test cases")
    meta = _json(row.get("metadata") or {}, "metadata")
    return _typed_cases(cases, meta.get("func_name") if isinstance(meta, dict) else None, "public_test_cases")


def _typed_cases(cases: list, fn_name: str | None, name: str) -> StdioTests | FunctionalTests:
    """LiveCodeBench/DeepCoder-style case lists: stdin or functional by each case's type."""
    try:
        kinds = {str(c.get("testtype") or c.get("type") or "stdin") for c in cases}
        functional = bool(kinds & {"functional", "function_call"})
        if functional:
            fn = fn_name or next((c["fn_name"] for c in cases if c.get("fn_name")), None)
            if not fn:
                raise ValueError(f"{name!r}: functional tests need a function name (metadata.func_name)")
            args = [c["input"] if isinstance(c["input"], list) else _lines_as_args(c["input"]) for c in cases]
            outs = [_json(c["output"], "output") if isinstance(c["output"], str) else c["output"] for c in cases]
            return _functional(fn, args, outs, name)
        return _stdio([c["input"] for c in cases], [c["output"] for c in cases], name)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{name!r}: malformed test case ({type(exc).__name__}: {exc})") from exc


def from_deepcoder(row: dict) -> StdioTests | FunctionalTests:
    tests = _json(_field(row, "tests"), "tests")
    if isinstance(tests, dict):
        return from_apps({"input_output": tests, "fn_name": row.get("fn_name")})
    if not isinstance(tests, list) or not tests:
        raise ValueError("'tests' must be a non-empty list or an APPS-style dict")
    meta = _json(row.get("metadata") or {}, "metadata")
    return _typed_cases(tests, meta.get("func_name") if isinstance(meta, dict) else None, "tests")


def from_codecontests(row: dict) -> StdioTests:
    if "test" in row and not any(k in row for k in ("public_tests", "private_tests", "generated_tests")):
        tests = _json(row["test"], "test")
        try:
            return _stdio([t["input"]["stdin"] for t in tests], [t["output"]["stdout"] for t in tests], "test")
        except (KeyError, TypeError) as exc:
            raise ValueError(f"'test': malformed case ({type(exc).__name__}: {exc})") from exc
    inputs: list = []
    outputs: list = []
    for name in ("public_tests", "private_tests", "generated_tests"):
        part = row.get(name)
        if part is None:
            continue
        part = _json(part, name)
        if not isinstance(part, dict) or len(part.get("input", [])) != len(part.get("output", [])):
            raise ValueError(f"{name!r} needs equal-length 'input' and 'output' lists")
        inputs += part["input"]
        outputs += part["output"]
    if not inputs:
        raise ValueError("row has no test cases in 'public_tests', 'private_tests' or 'generated_tests'")
    return _stdio(inputs, outputs, "public_tests")


def _leading_imports(source: str) -> str:
    return "\n".join(ln for ln in source.splitlines()
                     if ln.startswith("import ") or (ln.startswith("from ") and " import " in ln))


def from_humaneval(row: dict) -> AssertTests:
    test, entry = str(_field(row, "test")), str(_field(row, "entry_point"))
    if "def check" not in test:
        raise ValueError("'test' must define check(candidate)")
    imports = _leading_imports(str(row.get("prompt") or ""))
    code = (imports + "\n" if imports else "") + test.rstrip() + f"\n\ncheck({entry})\n"
    return AssertTests(code=code, entry_point=entry)


def from_mbpp(row: dict) -> AssertTests:
    tests = _field(row, "test_list")
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        raise ValueError("'test_list' must be a non-empty list of assert statements")
    imports = row.get("test_imports") or []
    if not isinstance(imports, list):
        raise ValueError("'test_imports' must be a list of import statements")  # the converter contract is ValueError
    return AssertTests(code="\n".join([*imports, *tests]) + "\n")


# The converters a source manifest may name (`converter:`), by name: the one list of them.
CONVERTERS: dict[str, Callable[[dict], StdioTests | FunctionalTests | AssertTests]] = {
    fn.__name__: fn
    for fn in (from_apps, from_livecodebench, from_deepcoder, from_codecontests, from_humaneval, from_mbpp)
}
