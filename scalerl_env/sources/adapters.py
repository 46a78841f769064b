"""Rows of public datasets → `ProblemRecord`, driven by the source's manifest.

One adapter serves every source: the manifest names the columns; math answers are read as they are,
after GSM8K's `####`, or from the last `\\boxed{}` of a worked solution (with the verifier's own
extractor, so the answer is what the verifier would read); code tests come from the converters in
`scalerl.verifiers.code.converters` (never re-implemented here).

Guarantees
- `prompt_id = make_prompt_id(source, problem text)`: the problem statement *before* the instruction
  is hashed, so the same problem gets the same id in every run, in any row order, whatever
  instruction template is configured (departure from hashing the full chat prompt: changing the
  instruction must not orphan a problem's pass-rate history in the ledger).
- `metadata["solution"]` holds a gold completion whenever the source has a reference: the worked
  solution when it contains a box, GSM8K's rationale with its `####` line turned into `\\boxed{}`,
  `\\boxed{answer}` otherwise; for code, the first Python reference program in a fenced block.
  `scalerl-env data check` runs exactly these through the verifiers.
- Difficulty prior (a pass rate in [0, 1]): `pass_rate` sources as given (Polaris's "k/8" strings
  parse to k/8); `level` and `ordinal` sources map level i of K (1-based) to 1 − (i − ½)/K — a monotone
  placement at bin centres, *not* a measured pass rate (DeepMath level 1 → 0.95, 10 → 0.05). The raw
  value is kept in `metadata["difficulty_raw"]`.
- Every failure on a row raises `AdapterError` with the column at fault; callers report and go on.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from typing import Any

from pydantic import Field
from scalerl.env.contracts.domains import RowReference, domain
from scalerl.env.contracts.records import ChatMessage, ProblemRecord, Strict, make_prompt_id

from .manifest import Difficulty, SourceManifest


class AdapterError(ValueError):
    """A row that does not fit its manifest; the message names the column."""


class PromptConfig(Strict):
    """How problems become chat prompts. The instruction follows the problem in the user message."""

    math_instruction: str = "Please reason step by step, and put your final answer within \\boxed{}."
    code_stdio_instruction: str = (
        "Write a Python 3 program that reads from standard input and writes to standard output. "
        "Put the complete program in a single ```python code block."
    )
    code_function_instruction: str = (
        "Write the Python function {entry_point}. Put the complete code in a single ```python code block."
    )
    system: str | None = Field(default=None, description="optional system message before the problem")


def adapt_row(manifest: SourceManifest, row: dict[str, Any], prompts: PromptConfig,
              extra_metadata: dict[str, Any] | None = None) -> ProblemRecord:
    """One raw row of `manifest`'s source as a problem record (raises AdapterError)."""
    problem = _problem_text(manifest, row)
    metadata: dict[str, Any] = dict(extra_metadata or {})
    if manifest.id:
        metadata["row_id"] = _column(row, manifest.id)
    for name in manifest.metadata_columns:
        if row.get(name) is not None:
            metadata[name] = row[name]
    prior = None
    if manifest.difficulty and row.get(manifest.difficulty.column) not in (None, ""):
        raw = row[manifest.difficulty.column]
        metadata["difficulty_raw"] = raw
        prior = difficulty_prior(raw, manifest.difficulty)
    spec = domain(manifest.domain)
    if spec.row_reference is None:
        raise AdapterError(f"domain {spec.name!r} reads no dataset rows (its spec has no row_reference)")
    ref = spec.row_reference(manifest, row, prompts)
    answer, tests, instruction = ref.answer, ref.tests, manifest.instruction or ref.instruction
    if ref.solution is not None:
        metadata["solution"] = ref.solution
    messages = ([ChatMessage(role="system", content=prompts.system)] if prompts.system else [])
    messages.append(ChatMessage(role="user", content=f"{problem}\n\n{instruction}" if instruction else problem))
    return ProblemRecord(
        prompt_id=make_prompt_id(manifest.name, problem), domain=manifest.domain, source=manifest.name,
        prompt=messages, answer=answer, tests=tests, difficulty_prior=prior, metadata=metadata,
    )


def _column(row: dict[str, Any], name: str) -> Any:
    if name not in row or row[name] is None:
        raise AdapterError(f"missing column {name!r}")
    return row[name]


def _text(row: dict[str, Any], name: str) -> str:
    value = _column(row, name)
    if not isinstance(value, str) or not value.strip():
        raise AdapterError(f"column {name!r} must be a non-empty string, got {type(value).__name__}")
    return value


def _last_user_turn(row: dict[str, Any], name: str) -> dict[str, Any]:
    """The row with a chat-message list in column `name` (RLVR rows' `messages`) read as its last user turn."""
    value = row.get(name)
    if isinstance(value, list) and value and all(isinstance(m, dict) for m in value):
        users = [m.get("content") for m in value if m.get("role") == "user"]
        return {**row, name: users[-1] if users else None}
    return row


def _problem_text(manifest: SourceManifest, row: dict[str, Any]) -> str:
    fields = {k: "\n".join(map(str, v)) if isinstance(v, list) else v for k, v in row.items()}
    fields["problem"] = _text(_last_user_turn(row, manifest.problem), manifest.problem).strip()
    try:
        text = manifest.problem_template.format_map(fields)
    except (KeyError, IndexError, ValueError) as exc:
        raise AdapterError(f"problem_template needs column {exc}") from exc
    starter = row.get(manifest.starter_code) if manifest.starter_code else None
    if isinstance(starter, str) and starter.strip():
        text += f"\n\nStart from this code:\n```python\n{starter.rstrip()}\n```"
    return text


def difficulty_prior(raw: Any, spec: Difficulty) -> float | None:
    """A source's difficulty value → pass-rate prior in [0, 1] (rules in the module docstring)."""
    if spec.kind == "pass_rate":
        text = str(raw).strip()
        if "/" in text:
            num, _, den = text.partition("/")
            value = float(num) / float(den)
        else:
            value = float(text)
        if not 0.0 <= value <= 1.0:
            raise AdapterError(f"difficulty {raw!r} is not a pass rate in [0, 1]")
        return value
    if spec.kind == "level":
        match = re.search(r"-?\d+(\.\d+)?", str(raw))
        if match is None or spec.levels is None:
            raise AdapterError(f"difficulty {raw!r} is not a level")
        level, top = float(match.group()), spec.levels
    else:
        labels = [label.lower() for label in spec.order]
        if str(raw).strip().lower() not in labels:
            return None  # e.g. TACO's UNKNOWN_DIFFICULTY: no prior, the row is still good
        level, top = labels.index(str(raw).strip().lower()) + 1, len(labels)
    if not 1 <= level <= top:
        raise AdapterError(f"difficulty {raw!r} outside 1..{top}")
    return round(1.0 - (level - 0.5) / top, 6)


def math_row_reference(manifest: SourceManifest, row: dict[str, Any], prompts: PromptConfig) -> RowReference:
    """The math domain's `row_reference`: the answer and a gold completion (rules in the module docstring)."""
    answer, solution = _math_reference(manifest, row)
    return RowReference(answer=answer, solution=solution, instruction=prompts.math_instruction)


def code_row_reference(manifest: SourceManifest, row: dict[str, Any], prompts: PromptConfig) -> RowReference:
    """The code domain's `row_reference`: tests from the manifest's converter and the first reference program."""
    tests = _code_tests(manifest, row)
    return RowReference(tests=tests, solution=_code_solution(manifest, row),
                        instruction=_code_instruction(tests, prompts))


_NUMBER_WITH_COMMAS = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")


def _math_reference(manifest: SourceManifest, row: dict[str, Any]) -> tuple[str, str]:
    """(answer, gold completion) for a math row."""
    column = manifest.answer or manifest.problem
    text = _text(row, column)
    if manifest.answer_from == "gsm8k":
        rationale, sep, raw = text.rpartition("####")
        if not sep or not raw.strip():
            raise AdapterError(f"column {column!r} has no '#### answer' line")
        raw = raw.strip()
        answer = raw.replace(",", "") if _NUMBER_WITH_COMMAS.match(raw) else raw
        return answer, f"{rationale.rstrip()}\nThe final answer is $\\boxed{{{raw}}}$."
    if manifest.answer_from == "boxed":
        answer = _boxed(text)
        if answer is None:
            raise AdapterError(f"column {column!r} has no \\boxed{{}} answer")
        return answer, text
    answer = text.strip()
    if answer.lower() in {a.lower() for a in manifest.skip_answers}:
        raise AdapterError(f"answer {answer!r} is not verifiable (skip_answers)")
    solution = row.get(manifest.solution) if manifest.solution else None
    if isinstance(solution, str) and _boxed(solution) is not None:
        return answer, solution
    return answer, f"\\boxed{{{answer}}}"


def _boxed(text: str) -> str | None:
    from scalerl.verifiers.math.extract import extract_answer

    found = extract_answer(text)
    return found.answer if found.kind == "answer" and found.method == "boxed" else None


def converter(name: str) -> Callable[[dict[str, Any]], Any]:
    """The converter `scalerl.verifiers.code.converters.<name>` (raises LookupError when absent)."""
    try:
        module = importlib.import_module("scalerl.verifiers.code.converters")
    except ImportError as exc:
        raise LookupError(f"scalerl.verifiers.code.converters is not available ({exc})") from exc
    fn = getattr(module, name, None)
    if fn is None:
        raise LookupError(f"scalerl.verifiers.code.converters has no {name!r}")
    return fn


def _code_tests(manifest: SourceManifest, row: dict[str, Any]):
    if not manifest.converter:
        raise AdapterError("code manifest without a converter")
    try:
        tests = converter(manifest.converter)(row)
    except LookupError:
        raise
    except Exception as exc:  # converters see hostile data: any failure is this row's problem
        raise AdapterError(f"{manifest.converter}: {exc.__class__.__name__}: {exc}") from exc
    if tests is None:
        raise AdapterError(f"{manifest.converter}: no tests in this row")
    return tests


def _code_solution(manifest: SourceManifest, row: dict[str, Any]) -> str | None:
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
        code = _text(row, manifest.problem) + value
    return f"```python\n{code.rstrip()}\n```" if isinstance(code, str) and code.strip() else None


def _code_instruction(tests: Any, prompts: PromptConfig) -> str:
    if tests.kind == "stdio":
        return prompts.code_stdio_instruction
    entry = f"`{tests.entry_point}`" if tests.entry_point else "described above"
    return prompts.code_function_instruction.format(entry_point=entry)
