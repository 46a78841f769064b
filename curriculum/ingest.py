"""Bulk import of verdict lines (JSONL) into the ledger: all or nothing.

A line is a `Verdict` (`status`, `reward`, `details`, `elapsed_s`, `id`) plus `prompt_id` and the optional
training context `domain`, `step`, `policy_version`, `sample_index`, `truncated`, `completion_tokens`.
Unknown keys are errors (a typo is never silently dropped).

Bad input is refused as a whole, before anything is written, with `path:line` in every message:
- a line that is not JSON, or not a verdict line (the field is named);
- a `prompt_id` not in `problems` (unless `allow_unknown=True`; then the line must carry `domain`);
- a `domain` that contradicts the problem's;
- a file whose content (sha256) was ingested before: duplicate ingests are *refused*, not merged, so
  re-running an import can never double-count samples. (`record` from the server is not deduplicated.)
The accepted file is appended in one transaction together with its sha256, so a crash leaves either
the whole file or none of it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import Field, ValidationError

from curriculum.ledger import Ledger
from curriculum.models import IngestError
from curriculum.schema import ATTEMPT_COLUMNS
from scalerl_env.config import validation_problems
from scalerl_env.records import Domain, Status, Strict

MAX_REPORTED = 20


class VerdictLine(Strict):
    """One line of a verdicts file to ingest."""

    prompt_id: str = Field(min_length=1)
    status: Status
    reward: float | None = Field(default=None, description="default: the reward table's value for status")
    details: dict = Field(default_factory=dict)
    elapsed_s: float = 0.0
    id: str | None = None
    domain: Domain | None = None
    step: int | None = Field(default=None, ge=0)
    policy_version: int | None = Field(default=None, ge=0)
    sample_index: int | None = Field(default=None, ge=0)
    truncated: bool | None = None
    completion_tokens: int | None = Field(default=None, ge=0)


def _error_text(exc: ValidationError) -> str:
    return "; ".join(validation_problems(exc, whole="line"))


def parse_lines(path: Path, data: bytes) -> list[tuple[int, VerdictLine]]:
    """(line number, parsed line) for every non-blank line; IngestError listing the bad lines."""
    parsed: list[tuple[int, VerdictLine]] = []
    errors: list[str] = []
    for lineno, raw in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            parsed.append((lineno, VerdictLine.model_validate(json.loads(raw))))
        except json.JSONDecodeError as exc:
            errors.append(f"{path}:{lineno}: not JSON ({exc.msg} at column {exc.colno})")
        except ValidationError as exc:
            errors.append(f"{path}:{lineno}: {_error_text(exc)}")
    if errors:
        raise IngestError(_summary(errors, "malformed line(s); nothing was ingested"))
    return parsed


def _summary(errors: list[str], what: str) -> str:
    more = f"\n... and {len(errors) - MAX_REPORTED} more" if len(errors) > MAX_REPORTED else ""
    return f"{len(errors)} {what}:\n" + "\n".join(errors[:MAX_REPORTED]) + more


def _resolve_domains(ledger: Ledger, path: Path, lines: list[tuple[int, VerdictLine]], allow_unknown: bool) -> list[str]:
    known = ledger.problem_domains([line.prompt_id for _, line in lines])
    errors, domains = [], []
    for lineno, line in lines:
        problem_domain = known.get(line.prompt_id)
        if problem_domain is None and not allow_unknown:
            errors.append(f"{path}:{lineno}: unknown prompt_id {line.prompt_id!r} (not in problems)")
        elif problem_domain is None and line.domain is None:
            errors.append(f"{path}:{lineno}: prompt_id {line.prompt_id!r} is not in problems; give its 'domain'")
        elif problem_domain is not None and line.domain is not None and line.domain != problem_domain:
            errors.append(f"{path}:{lineno}: domain {line.domain!r} but problem {line.prompt_id!r} is "
                          f"{problem_domain!r}")
        domains.append(problem_domain or line.domain or "")
    if errors:
        hint = " (load the problems first, or pass --allow-unknown)" if not allow_unknown else ""
        raise IngestError(_summary(errors, f"line(s) refused{hint}; nothing was ingested"))
    return domains


def ingest_file(ledger: Ledger, path: str | Path, *, allow_unknown: bool = False) -> int:
    """Append every verdict line of `path` in one transaction; returns the number of rows."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IngestError(f"cannot read {path}: {exc}") from exc
    sha256 = hashlib.sha256(data).hexdigest()
    earlier = ledger.has_ingested(sha256)
    if earlier is not None:
        raise IngestError(f"{path} (sha256 {sha256[:12]}…) was already ingested from {earlier[0]} at "
                          f"{earlier[2]} ({earlier[1]} rows); refusing to count its samples twice")
    lines = parse_lines(path, data)
    domains = _resolve_domains(ledger, path, lines, allow_unknown)
    cols: dict[str, list] = {name: [] for name in ATTEMPT_COLUMNS}
    for (_, line), domain in zip(lines, domains):
        row = line.model_dump(exclude={"details"})
        row.update(domain=domain, status=line.status.value, correct=line.status is Status.correct, item_id=line.id)
        for name in ATTEMPT_COLUMNS:
            cols[name].append(row[name])
    return ledger.record_attempts(cols, ingest=(sha256, str(path)))
