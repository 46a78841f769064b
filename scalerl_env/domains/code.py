"""The code domain: typed tests (stdio, functional, assert), run in the sandbox (`scalerl.verifiers.code`).
Its spec, and the hooks that read a bare reference and a public dataset's row.

A row's tests come from the manifest's converter (`scalerl.verifiers.code.converters`); its gold
completion is the first Python reference program, in a fenced block. The instruction after the problem
text says what to write: a stdin/stdout program or the function under test (the spec's `prompt`
instruction is the one for records that carry none; both put the code in a ```python block, the
template's marker). Hooks import their modules when called, so loading the registry imports no sandbox code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scalerl.env.contracts.domains import DomainSpec, GeneratorFamily, PromptDefaults, RowReference

if TYPE_CHECKING:
    from scalerl.env.sources.manifest import SourceManifest
    from scalerl.verifiers.code.verifier import CodeBatchVerifier
    from scalerl.verifiers.verifier_config import VerifierConfig

STDIO_INSTRUCTION = ("Write a Python 3 program that reads from standard input and writes to standard output. "
                     "Put the complete program in a single ```python code block.")
FUNCTION_INSTRUCTION = ("Write the Python function {entry_point}. "
                        "Put the complete code in a single ```python code block.")


def verifier(config: VerifierConfig) -> CodeBatchVerifier:
    from scalerl.verifiers.code.verifier import CodeBatchVerifier

    return CodeBatchVerifier(config.code, config.rewards)


def generator_families() -> Mapping[str, GeneratorFamily]:
    from scalerl.env.sources.generators.code_tasks import CODE_FAMILIES

    return CODE_FAMILIES


def claims_reference(reference: Any) -> bool:
    """A bare reference is code's when it holds a test spec (`scalerl.verifiers.code.reference`)."""
    from scalerl.verifiers.code.reference import code_spec

    return code_spec(reference) is not None


def row_reference(manifest: SourceManifest, row: dict[str, Any]) -> RowReference:
    """A public row's tests, reference program and instruction (rules in the module docstring)."""
    from scalerl.env.sources.rows import RowFormatError
    from scalerl.verifiers.code.converters import CONVERTERS

    if not manifest.converter:
        raise RowFormatError("code manifest without a converter")
    try:
        tests = CONVERTERS[manifest.converter](row)
    except Exception as exc:  # converters see hostile data: any failure is this row's problem
        raise RowFormatError(f"{manifest.converter}: {exc.__class__.__name__}: {exc}") from exc
    if tests is None:
        raise RowFormatError(f"{manifest.converter}: no tests in this row")
    if tests.kind == "stdio":
        instruction = STDIO_INSTRUCTION
    else:
        instruction = FUNCTION_INSTRUCTION.format(
            entry_point=f"`{tests.entry_point}`" if tests.entry_point else "described above")
    return RowReference(tests=tests, solution=_solution(manifest, row), instruction=instruction)


def _solution(manifest: SourceManifest, row: dict[str, Any]) -> str | None:
    """The first Python reference program of the row, fenced; None when it has none."""
    from scalerl.env.sources.rows import column_text

    value = row.get(manifest.solution) if manifest.solution else None
    code: Any = None
    if value in (None, "", []):
        return None
    if manifest.solution_format == "text":
        code = value
    elif manifest.solution_format in ("json_list", "list"):
        items = json.loads(value) if manifest.solution_format == "json_list" and isinstance(value, str) else value
        code = next((s for s in items or [] if isinstance(s, str) and s.strip()), None)
    elif manifest.solution_format == "codecontests":
        pairs = zip(value.get("language") or [], value.get("solution") or [])
        code = next((s for lang, s in pairs if lang == 3), None)  # 3 = PYTHON3 in CodeContests
    elif manifest.solution_format == "humaneval":
        code = column_text(row, manifest.problem) + value
    return f"```python\n{code.rstrip()}\n```" if isinstance(code, str) and code.strip() else None


SPEC = DomainSpec(
    name="code",
    reference="tests",
    description="a Python program run against tests in the sandbox",
    verifier=verifier,
    prompt=PromptDefaults(instruction="Answer with the complete code in a single ```python code block.",
                          marker="```python"),
    generator_families=generator_families,
    row_reference=row_reference,
    verl_abilities=("code", "coding"),
    claims_reference=claims_reference,
    rank=1,
)
