"""Turning verdicts and attempt rows into the Arrow batches the ledger appends.

Every path into `attempts` goes through `to_attempts_table`, which checks the columns once for the
whole batch (required columns present and non-null, statuses known) and fills the derived ones:
`correct` from `status`, and `reward` from the reward table when a row has none. `rule` (what decided
the verdict, from `Verdict.details["rule"]`) is optional: rows without it store NULL.

Not checked here: duplicates, and whether a `prompt_id` is in `problems` (the ledger records what it is
given; `scalerl.curriculum.ledger.ingest` refuses unknown prompts unless told otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from scalerl.curriculum.ledger.models import LedgerError
from scalerl.curriculum.ledger.schema import ATTEMPT_COLUMNS, COMPLETION_COLUMN, DETAIL_COLUMNS, DETAIL_TYPES
from scalerl.env.contracts.records import DEFAULT_REWARDS, RewardTable, Status, Verdict, VerifyItem

ATTEMPT_SCHEMA = pa.schema([
    ("prompt_id", pa.string()), ("domain", pa.string()), ("step", pa.int64()), ("policy_version", pa.int64()),
    ("sample_index", pa.int32()), ("reward", pa.float64()), ("status", pa.string()), ("correct", pa.bool_()),
    ("truncated", pa.bool_()), ("completion_tokens", pa.int64()), ("item_id", pa.string()),
    ("elapsed_s", pa.float64()),
    *((name, {"VARCHAR": pa.string(), "INTEGER": pa.int32()}[kind]) for name, kind in DETAIL_TYPES.items()),
    (COMPLETION_COLUMN, pa.string()),
])
assert tuple(ATTEMPT_SCHEMA.names) == ATTEMPT_COLUMNS + DETAIL_COLUMNS + (COMPLETION_COLUMN,)
# What a detail value must be to be stored (bool is an int in Python, and never a count here).
_DETAIL_CHECKS = {name: (lambda v: isinstance(v, str)) if kind == "VARCHAR"
                  else (lambda v: isinstance(v, int) and not isinstance(v, bool) and -2**31 <= v < 2**31)
                  for name, kind in DETAIL_TYPES.items()}
REQUIRED = ("prompt_id", "domain", "status")
STATUSES = [s.value for s in Status]


def rows_from_verdicts(
    items: Sequence[VerifyItem], verdicts: Sequence[Verdict], *, step: int | None, policy_version: int | None
) -> dict[str, list[Any]]:
    """Columns for the items that carry a prompt_id; an item's own step/policy_version win."""
    if len(items) != len(verdicts):
        raise LedgerError(f"record() got {len(items)} items but {len(verdicts)} verdicts")
    cols: dict[str, list[Any]] = {name: [] for name in ATTEMPT_SCHEMA.names}
    for item, verdict in zip(items, verdicts):
        if item.prompt_id is None:
            continue
        for name, value in detail_values(verdict.details).items():
            cols[name].append(value)
        cols[COMPLETION_COLUMN].append(getattr(item, "completion", None))  # a RecordedItem carries none
        values = (
            item.prompt_id, item.domain, item.step if item.step is not None else step,
            item.policy_version if item.policy_version is not None else policy_version, item.sample_index,
            float(verdict.reward), verdict.status.value, verdict.status is Status.correct, item.truncated,
            item.completion_tokens, verdict.id or item.id or None, float(verdict.elapsed_s),
        )
        for name, value in zip(ATTEMPT_COLUMNS, values):
            cols[name].append(value)
    return cols


def detail_values(details: Mapping[str, Any] | None) -> dict[str, Any]:
    """The detail columns' values from a verdict's details: a value of another type is None."""
    details = details or {}
    return {name: value if (value := details.get(name)) is not None and ok(value) else None
            for name, ok in _DETAIL_CHECKS.items()}


def detail_arrays(details: pa.ChunkedArray | None, rows: int) -> dict[str, pa.ChunkedArray | pa.Array]:
    """The detail columns from a struct column of details read column-wise (`detail_values` for a whole
    file: a field of another type, or an INTEGER out of range, is null)."""
    out: dict[str, pa.ChunkedArray | pa.Array] = {}
    for name, kind in DETAIL_TYPES.items():
        target = ATTEMPT_SCHEMA.field(name).type
        has = details is not None and details.type.get_field_index(name) >= 0
        column = pc.struct_field(details, name) if has else None
        if column is not None and kind == "VARCHAR" and pa.types.is_string(column.type):
            out[name] = column
        elif column is not None and kind == "INTEGER" and pa.types.is_integer(column.type):
            fits = pc.and_(pc.greater_equal(column, -2**31), pc.less(column, 2**31))
            out[name] = pc.if_else(fits, column, pa.scalar(None, column.type)).cast(target)
        else:
            out[name] = pa.nulls(rows, target)
    return out


def to_attempts_table(
    rows: pa.Table | Sequence[Mapping[str, Any]] | Mapping[str, list[Any]],
    rewards: RewardTable = DEFAULT_REWARDS, *, keep_completions: bool = True,
) -> pa.Table:
    """An Arrow table with exactly ATTEMPT_SCHEMA; raises LedgerError naming the bad column.
    `keep_completions` off: the completion column is all NULL whatever the rows carry."""
    if isinstance(rows, pa.Table):
        table = rows
    elif isinstance(rows, Mapping):
        table = pa.table(dict(rows))
    else:
        rows = list(rows)
        names = list(dict.fromkeys(k for row in rows for k in row))  # every row's keys, not just the first's
        table = pa.table({k: [row.get(k) for row in rows] for k in names}) if rows else pa.table({})
    unknown = [c for c in table.column_names if c not in ATTEMPT_SCHEMA.names]
    if unknown:
        raise LedgerError(f"unknown attempt column(s) {unknown}; known: {ATTEMPT_SCHEMA.names}")
    missing = [c for c in REQUIRED if c not in table.column_names]
    if missing and table.num_rows:
        raise LedgerError(f"attempt rows need column(s) {missing}")
    n = table.num_rows
    columns = []
    for field in ATTEMPT_SCHEMA:
        if field.name in table.column_names and (keep_completions or field.name != COMPLETION_COLUMN):
            try:
                columns.append(table[field.name].cast(field.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise LedgerError(f"attempt column {field.name!r} is not {field.type}: {exc}") from exc
        else:
            columns.append(pa.nulls(n, field.type))
    out = pa.Table.from_arrays(columns, schema=ATTEMPT_SCHEMA)
    return _fill_derived(out, rewards) if n else out


def _fill_derived(table: pa.Table, rewards: RewardTable) -> pa.Table:
    for name in REQUIRED:
        if table[name].null_count:
            raise LedgerError(f"attempt column {name!r} has {table[name].null_count} null value(s)")
    for name in ("step", "policy_version", "sample_index", "completion_tokens"):
        low = pc.min(table[name]).as_py()
        if low is not None and low < 0:  # step -1 would also collide with the "no step" group key
            raise LedgerError(f"attempt column {name!r} has a negative value ({low})")
    known = pc.is_in(table["status"], value_set=pa.array(STATUSES))
    if not pc.all(known).as_py():
        bad = pc.filter(table["status"], pc.invert(known)).unique().to_pylist()[:5]
        raise LedgerError(f"unknown status value(s) {bad}; known: {STATUSES}")
    is_correct = pc.equal(table["status"], "correct")
    given = table["correct"]
    if given.null_count < len(given) and not pc.all(pc.equal(pc.fill_null(given, True), is_correct)).as_py():
        # `correct` is derived from status; a row that says otherwise is contradictory input.
        raise LedgerError("attempt column 'correct' contradicts 'status' (correct is status == 'correct')")
    table = table.set_column(table.schema.get_field_index("correct"), "correct", is_correct)
    if table["reward"].null_count:
        by_status = pa.array([rewards.reward(s) for s in STATUSES], pa.float64())
        default = pc.take(by_status, pc.index_in(table["status"], value_set=pa.array(STATUSES)))
        filled = pc.coalesce(table["reward"], default)
        table = table.set_column(table.schema.get_field_index("reward"), "reward", filled)
    return table
