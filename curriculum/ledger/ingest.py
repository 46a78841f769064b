"""Bulk import of verdict lines (JSONL) into the ledger: all or nothing.

A line is a `Verdict` (`status`, `reward`, `details`, `elapsed_s`, `id`) plus `prompt_id` and the optional
training context `domain`, `step`, `policy_version`, `sample_index`, `truncated`, `completion_tokens`.
Unknown keys are errors (a typo is never silently dropped). The detail columns (`rule`,
`verifier_version`, `settings_digest`, `second_opinion`, `turns`, `tool_calls`) come from `details`, as
on every recording path; a line carries no completion.

Bad input is refused as a whole, before anything is written, with `path:line` in every message:
- a line that is not JSON, or not a verdict line (the field is named);
- a `prompt_id` not in `problems` (unless `allow_unknown=True`; then the line must carry `domain`);
- a `domain` that contradicts the problem's;
- a file whose content (sha256) was ingested before: duplicate ingests are *refused*, not merged, so
  re-running an import can never double-count samples. (`record` from the server is not deduplicated.)
The accepted file is appended in one transaction together with its sha256, so a crash leaves either
the whole file or none of it.

Speed: the file is first read column-wise (pyarrow's JSON reader with the line schema) and checked
column by column (types, required values, statuses, domains, non-negative counters). Only when that
bulk read or any check fails is the file parsed again line by line with the pydantic model, which
produces the `path:line` messages; so good files take the bulk path, and bad ones get exactly the same
refusal as before. Both paths accept the same files (the per-line model is the definition).
"""

from __future__ import annotations

import json
import re
from concurrent.futures import Future
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, ValidationError
from scalerl.curriculum.ledger.attempts import detail_arrays, detail_values
from scalerl.curriculum.ledger.ingest_read import LINE_SCHEMA, VerdictFile, read_verdict_file
from scalerl.curriculum.ledger.models import IngestError
from scalerl.curriculum.ledger.schema import ATTEMPT_COLUMNS, DETAIL_COLUMNS
from scalerl.curriculum.ledger.store import Ledger
from scalerl.env.contracts.config_loader import validation_problems
from scalerl.env.contracts.domains import domain_names
from scalerl.env.contracts.records import Domain, Status, Strict

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


def _resolve_domains(ledger: Ledger, path: Path, lines: list[tuple[int, VerdictLine]],
                     allow_unknown: bool) -> list[str]:
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


def ingest_file(ledger: Ledger, path: str | Path, *, allow_unknown: bool = False,
                reading: Future[VerdictFile] | None = None) -> int:
    """Append every verdict line of `path` in one transaction; returns the number of rows. `reading`: the
    file already being read (`read_verdict_file(path)` submitted to a thread by the caller)."""
    path = Path(path)
    try:
        read = reading.result() if reading is not None else read_verdict_file(path)
    except OSError as exc:
        raise IngestError(f"cannot read {path}: {exc}") from exc
    data, sha256 = read.data, read.sha256
    earlier = ledger.has_ingested(sha256)
    if earlier is not None:
        raise IngestError(f"{path} (sha256 {sha256[:12]}…) was already ingested from {earlier[0]} at "
                          f"{earlier[2]} ({earlier[1]} rows); refusing to count its samples twice")
    table = bulk_table(ledger, read, allow_unknown)
    if table is not None:
        return ledger.record_attempts(table, ingest=(sha256, str(path)))
    lines = parse_lines(path, data)  # the per-line path: exact messages for whatever the bulk checks refused
    domains = _resolve_domains(ledger, path, lines, allow_unknown)
    cols: dict[str, list] = {name: [] for name in (*ATTEMPT_COLUMNS, *DETAIL_COLUMNS)}
    for (_, line), domain in zip(lines, domains):
        row = line.model_dump(exclude={"details"})
        row.update(domain=domain, status=line.status.value, correct=line.status is Status.correct, item_id=line.id,
                   **detail_values(line.details))
        for name, values in cols.items():
            values.append(row[name])
    return ledger.record_attempts(cols, ingest=(sha256, str(path)))


# ------------------------------------------------------------------------------------------ bulk path
_STATUSES = pa.array([s.value for s in Status])
_NULL_DETAILS = re.compile(rb'"details"\s*:\s*null')
_NULL_ELAPSED = re.compile(rb'"elapsed_s"\s*:\s*null')


def bulk_table(ledger: Ledger, read: VerdictFile, allow_unknown: bool) -> pa.Table | None:
    """The attempt rows of the file read and checked column-wise; None when anything needs the per-line
    path (a bad line, a blank line, a value pydantic would coerce): that path then decides and explains."""
    table = read.table
    if table is None or not _columns_valid(table, read.data):
        return None
    domains = _bulk_domains(ledger, table, allow_unknown)
    if domains is None:
        return None
    return pa.table({
        "prompt_id": table["prompt_id"], "domain": domains, "step": table["step"],
        "policy_version": table["policy_version"], "sample_index": table["sample_index"], "reward": table["reward"],
        "status": table["status"], "truncated": table["truncated"], "completion_tokens": table["completion_tokens"],
        "item_id": table["id"], "elapsed_s": pc.fill_null(table["elapsed_s"], 0.0),
        **detail_arrays(table["details"] if "details" in table.column_names else None, table.num_rows),
    })


def _columns_valid(table: pa.Table, data: bytes) -> bool:
    """What `VerdictLine` checks, column by column. The reader gives null for both an absent key and
    an explicit null; the model allows both where it has a None default, but for `details` and
    `elapsed_s` only absence: then the raw text decides (an escaped key name goes the per-line way)."""
    if not set(table.column_names) <= {*LINE_SCHEMA.names, "details"}:
        return False  # an unknown key
    for name, null_json in (("details", _NULL_DETAILS), ("elapsed_s", _NULL_ELAPSED)):
        column = table[name] if name in table.column_names else None
        if column is not None and name == "details" and not pa.types.is_struct(column.type):
            return False
        if column is not None and column.null_count and (null_json.search(data) or b"\\u" in data):
            return False
    if any(table[c].null_count for c in ("prompt_id", "status")):
        return False
    if pc.min(pc.utf8_length(table["prompt_id"])).as_py() < 1:
        return False
    if not pc.all(pc.is_in(table["status"], value_set=_STATUSES)).as_py():
        return False
    domain = table["domain"]
    given = pc.drop_null(domain)
    if len(given) and not pc.all(pc.is_in(given, value_set=pa.array(domain_names()))).as_py():
        return False
    for name in ("step", "policy_version", "sample_index", "completion_tokens"):
        low = pc.min(table[name]).as_py()
        if low is not None and low < 0:
            return False
    return True


def _bulk_domains(ledger: Ledger, table: pa.Table, allow_unknown: bool) -> pa.ChunkedArray | None:
    """Each row's domain from `problems` (or its own when unknown and allowed); None on any conflict."""
    ids = pc.unique(table["prompt_id"])
    known = ledger.problem_domains(ids.to_pylist())
    known_ids = pa.array(list(known), pa.string())
    problem_domain = pc.take(pa.array(list(known.values()), pa.string()),
                             pc.index_in(table["prompt_id"], value_set=known_ids))
    given = table["domain"]
    if problem_domain.null_count and not allow_unknown:
        return None
    conflict = pc.and_(pc.is_valid(problem_domain), pc.is_valid(given))
    if pc.any(pc.and_(conflict, pc.not_equal(problem_domain, given))).as_py():
        return None
    out = pc.coalesce(problem_domain, given)
    return None if out.null_count else out
