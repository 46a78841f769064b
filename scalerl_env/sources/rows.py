"""Rows of public datasets → `ProblemRecord`, driven by the source's manifest.

One reader serves every source: the manifest names the columns; the domain's spec reads the reference
from the row (`DomainSpec.row_reference`: the math answer, the code tests, the `if` constraints, in
`scalerl_env/domains/`) and gives the instruction that follows the problem text: the row reference's
own (code: by test kind), else the spec's `prompt.instruction`, unless the manifest names one. The
system message is left to whoever renders the prompt (the trainer's `prompts.<domain>.system`).

Guarantees
- `prompt_id = make_prompt_id(source, problem text)`: the problem statement *before* the instruction
  is hashed, so the same problem gets the same id in every run, in any row order, whatever
  instruction is configured (departure from hashing the full chat prompt: changing the instruction
  must not orphan a problem's pass-rate history in the ledger).
- `metadata["solution"]` holds the gold completion the domain's row reference gives (when the source
  has one); `scalerl-env data check` runs exactly these through the verifiers.
- Difficulty prior (a pass rate in [0, 1]): `pass_rate` sources as given (Polaris's "k/8" strings
  parse to k/8); `level` and `ordinal` sources map level i of K (1-based) to 1 − (i − ½)/K — a monotone
  placement at bin centres, *not* a measured pass rate (DeepMath level 1 → 0.95, 10 → 0.05). The raw
  value is kept in `metadata["difficulty_raw"]`.
- Every failure on a row raises `RowFormatError` with the column at fault; callers report and go on.
"""

from __future__ import annotations

import re
from typing import Any

from scalerl.env.contracts.domains import domain
from scalerl.env.contracts.records import ChatMessage, ProblemRecord, make_prompt_id

from .manifest import Difficulty, SourceManifest


class RowFormatError(ValueError):
    """A row that does not fit its manifest; the message names the column."""


def row_record(manifest: SourceManifest, row: dict[str, Any],
               extra_metadata: dict[str, Any] | None = None) -> ProblemRecord:
    """One raw row of `manifest`'s source as a problem record (raises RowFormatError)."""
    problem = _problem_text(manifest, row)
    metadata: dict[str, Any] = dict(extra_metadata or {})
    if manifest.id:
        metadata["row_id"] = column(row, manifest.id)
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
        raise RowFormatError(f"domain {spec.name!r} reads no dataset rows (its spec has no row_reference)")
    ref = spec.row_reference(manifest, row)
    if ref.solution is not None:
        metadata["solution"] = ref.solution
    instruction = manifest.instruction or ref.instruction or spec.prompt.instruction
    content = f"{problem}\n\n{instruction}" if instruction else problem
    return ProblemRecord(
        prompt_id=make_prompt_id(manifest.name, problem), domain=manifest.domain, source=manifest.name,
        prompt=[ChatMessage(role="user", content=content)], answer=ref.answer, tests=ref.tests,
        difficulty_prior=prior, metadata=metadata,
    )


def column(row: dict[str, Any], name: str) -> Any:
    """Column `name` of `row` (RowFormatError when it is missing or null)."""
    if name not in row or row[name] is None:
        raise RowFormatError(f"missing column {name!r}")
    return row[name]


def column_text(row: dict[str, Any], name: str) -> str:
    """Column `name` of `row` as a non-empty string (RowFormatError otherwise)."""
    value = column(row, name)
    if not isinstance(value, str) or not value.strip():
        raise RowFormatError(f"column {name!r} must be a non-empty string, got {type(value).__name__}")
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
    fields["problem"] = column_text(_last_user_turn(row, manifest.problem), manifest.problem).strip()
    try:
        text = manifest.problem_template.format_map(fields)
    except (KeyError, IndexError, ValueError) as exc:
        raise RowFormatError(f"problem_template needs column {exc}") from exc
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
            raise RowFormatError(f"difficulty {raw!r} is not a pass rate in [0, 1]")
        return value
    if spec.kind == "level":
        match = re.search(r"-?\d+(\.\d+)?", str(raw))
        if match is None or spec.levels is None:
            raise RowFormatError(f"difficulty {raw!r} is not a level")
        level, top = float(match.group()), spec.levels
    else:
        labels = [label.lower() for label in spec.order]
        if str(raw).strip().lower() not in labels:
            return None  # e.g. TACO's UNKNOWN_DIFFICULTY: no prior, the row is still good
        level, top = labels.index(str(raw).strip().lower()) + 1, len(labels)
    if not 1 <= level <= top:
        raise RowFormatError(f"difficulty {raw!r} outside 1..{top}")
    return round(1.0 - (level - 0.5) / top, 6)
