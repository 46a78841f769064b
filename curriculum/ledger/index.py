"""The ledger owner's per-prompt counters and the per-batch group counts that advance them.

Guarantees
- `Stats` holds the counters of one `prompt_stats` row (`scalerl.curriculum.ledger.schema`): the counts the `pass_rates`
  view shows, plus the reward sum and step range they are derived from; `Stats.row()` is their values in
  `STATS_COLUMNS` order; a `Retirement` (or `NOT_RETIRED`) completes the row (`ROW_SCHEMA`).
- `group_counts` of an attempts batch gives, for every (prompt, step group), the rows, scored
  (`status <> 'error'`), correct and truncated counts and the reward sum that the view's definition
  aggregates, in the order retirements are decided: by step, then by first appearance in the batch.
  Vectorised over the Arrow buffers (numpy sort and bincount): no Python loop per row, and no pyarrow
  acero (its import alone costs a command-line start-up a tenth of a second).

Not here: deciding retirements, locking and writing (`scalerl.curriculum.ledger.store`).
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scalerl.curriculum.ledger.schema import NO_STEP, RETIRED_COLUMNS

# The prompt_stats counter columns (`Stats.row()`), then the retirement a retired prompt's rows carry
# (`Retirement`); version and last_seen_at are added by the INSERT.
STATS_SCHEMA = pa.schema([
    ("prompt_id", pa.string()), ("domain", pa.string()), ("attempts", pa.int64()), ("scored", pa.int64()),
    ("correct", pa.int64()), ("truncated", pa.int64()), ("reward_sum", pa.float64()), ("first_step", pa.int64()),
    ("last_step", pa.int64()), ("last_group_step", pa.int64()), ("last_group_scored", pa.int64()),
    ("last_group_correct", pa.int64()),
])
STATS_COLUMNS = tuple(STATS_SCHEMA.names)
_ARROW_TYPES = {"BIGINT": pa.int64(), "DOUBLE": pa.float64(), "TIMESTAMPTZ": pa.timestamp("us", tz="UTC")}
RETIREMENT_SCHEMA = pa.schema([(name, _ARROW_TYPES[kind]) for name, kind in RETIRED_COLUMNS])
ROW_SCHEMA = pa.schema([*STATS_SCHEMA, *RETIREMENT_SCHEMA])
NOT_RETIRED = (None,) * len(RETIREMENT_SCHEMA)


class Retirement(NamedTuple):
    """A prompt's retirement, as its `prompt_stats` rows carry it (`RETIREMENT_SCHEMA` order)."""

    seq: int
    step: int | None
    epoch: int | None
    pass_rate: float
    window_samples: int
    threshold: float
    retired_at: datetime


class Stats:
    """Mutable counters of one prompt (the owner's copy of its latest `prompt_stats` row)."""

    __slots__ = ("attempts", "correct", "domain", "first_step", "gcorrect", "gscored", "gstep", "last_step",
                 "reward_sum", "scored", "truncated")

    def __init__(self, domain: str, attempts: int = 0, scored: int = 0, correct: int = 0, truncated: int = 0,
                 reward_sum: float = 0.0, first_step: int | None = None, last_step: int | None = None,
                 gstep: int = NO_STEP - 1, gscored: int = 0, gcorrect: int = 0):
        self.domain, self.attempts, self.scored, self.correct = domain, attempts, scored, correct
        self.truncated, self.reward_sum, self.first_step, self.last_step = truncated, reward_sum, first_step, last_step
        self.gstep, self.gscored, self.gcorrect = gstep, gscored, gcorrect

    def copy(self) -> Stats:
        return Stats(self.domain, self.attempts, self.scored, self.correct, self.truncated, self.reward_sum,
                     self.first_step, self.last_step, self.gstep, self.gscored, self.gcorrect)

    def add_group(self, g: Group) -> None:
        self.attempts, self.scored, self.correct = (self.attempts + g.rows, self.scored + g.scored,
                                                    self.correct + g.correct)
        self.truncated, self.reward_sum = self.truncated + g.truncated, self.reward_sum + g.reward_sum
        if g.gstep != NO_STEP:
            self.first_step = g.gstep if self.first_step is None else min(self.first_step, g.gstep)
            self.last_step = g.gstep if self.last_step is None else max(self.last_step, g.gstep)
        if g.gstep > self.gstep:
            self.gstep, self.gscored, self.gcorrect = g.gstep, g.scored, g.correct
        elif g.gstep == self.gstep:
            self.gscored, self.gcorrect = self.gscored + g.scored, self.gcorrect + g.correct

    def window(self, window: str) -> tuple[int, int]:
        """(correct, scored) of the retirement window: the last group ("group") or every sample ("all")."""
        return (self.gcorrect, self.gscored) if window == "group" else (self.correct, self.scored)

    def row(self, prompt_id: str) -> tuple:
        return (prompt_id, self.domain, self.attempts, self.scored, self.correct, self.truncated, self.reward_sum,
                self.first_step, self.last_step, self.gstep, self.gscored, self.gcorrect)


class Group(NamedTuple):
    """One prompt's rows at one step (gstep = NO_STEP for rows without a step) within a batch."""

    prompt_id: str
    gstep: int
    rows: int
    scored: int
    correct: int
    truncated: int
    reward_sum: float


def group_counts(table: pa.Table) -> tuple[list[Group], dict[str, str]]:
    """The batch's groups in decision order, and each prompt's domain (that of its first row)."""
    n = table.num_rows
    if n == 0:
        return [], {}
    encoded = pc.dictionary_encode(table["prompt_id"].combine_chunks())
    pid = encoded.indices.to_numpy().astype(np.int64)
    step = _numpy(pc.fill_null(table["step"], NO_STEP))
    order = np.lexsort((step, pid))  # stable: within a group, rows keep their batch order
    sp, ss = pid[order], step[order]
    boundary = np.concatenate(([True], (sp[1:] != sp[:-1]) | (ss[1:] != ss[:-1])))
    starts = np.flatnonzero(boundary)
    gid = np.empty(n, np.int64)
    gid[order] = np.cumsum(boundary) - 1
    groups = len(starts)
    first_row = order[starts]
    scored = np.bincount(gid, _numpy(pc.not_equal(table["status"], "error")), groups)
    correct = np.bincount(gid, _numpy(table["correct"]), groups)
    truncated = np.bincount(gid, _numpy(pc.fill_null(table["truncated"], False)), groups)
    reward = np.bincount(gid, _numpy(table["reward"]), groups)
    rows = np.bincount(gid, minlength=groups)
    decide = np.lexsort((first_row, ss[starts]))
    names = encoded.dictionary.to_pylist()
    out = [Group(names[p], s, r, sc, c, t, w) for p, s, r, sc, c, t, w in zip(
        sp[starts][decide].tolist(), ss[starts][decide].tolist(), rows[decide].tolist(),
        scored[decide].astype(np.int64).tolist(), correct[decide].astype(np.int64).tolist(),
        truncated[decide].astype(np.int64).tolist(), reward[decide].tolist())]
    pid_starts = np.flatnonzero(np.concatenate(([True], sp[1:] != sp[:-1])))
    pid_first = np.minimum.reduceat(order, pid_starts)
    domains = pc.dictionary_encode(table["domain"].combine_chunks())  # numpy indexing, not pa.array(numpy):
    domain_names = domains.dictionary.to_pylist()                     # that one imports numpy.ma
    domain_of_first = [domain_names[d] for d in domains.indices.to_numpy()[pid_first].tolist()]
    return out, dict(zip((names[p] for p in sp[pid_starts].tolist()), domain_of_first))


def rows_table(rows: list[tuple], schema: pa.Schema) -> pa.Table:
    """An Arrow table of `schema` from row tuples (column by column, typed: no inference)."""
    return pa.Table.from_arrays([pa.array(col, field.type) for col, field in zip(zip(*rows), schema)], schema=schema)


def _numpy(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A non-null numeric or boolean column as numpy (booleans as 0/1 floats for bincount weights)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_boolean(array.type):
        return array.to_numpy(zero_copy_only=False).astype(np.float64)
    return array.to_numpy()
