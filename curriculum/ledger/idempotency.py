"""Insert-once recording: each (idempotency key, item index) reaches `attempts` at most once.

A scoring request may carry an idempotency key (the client's `Idempotency-Key` header, stable across
retries); its items are numbered by their index within the request. `claim` runs inside the ledger's
write transaction, before the attempts are appended: it inserts the batch's (key, index) pairs into
`idempotency` (primary key, `ON CONFLICT DO NOTHING ... RETURNING`), and only the rows whose pair it
inserted are appended, in the same transaction, so a batch and its claims commit or roll back together.
A pair that is already there (a retry, through this replica or another) is not appended again; its stored
verdict is returned so the retry answers what the first attempt recorded.

Guaranteed: however many times and through however many replicas a pair arrives, one attempt row (the
owner is the single writer and claims under its write lock). A pair seen twice in one batch counts once.
A key reused for a different prompt at the same index is refused (`IdempotencyConflict`), nothing written.
Not guaranteed: pairs are kept for good (one row per keyed attempt; delete old rows offline if the table
grows too large), and looking up a replayed pair's verdict scans the table (only retries pay it).
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa
from scalerl.curriculum.ledger.models import MAX_KEY_CHARS, LedgerError

KEY_SCHEMA = pa.schema([("key", pa.string()), ("item_index", pa.int32()), ("prompt_id", pa.string()),
                        ("verdict", pa.string())])
CLAIM_SQL = ("INSERT INTO idempotency (key, item_index, prompt_id, verdict) SELECT * FROM _keys "
             "ON CONFLICT DO NOTHING RETURNING key, item_index")
STORED_SQL = ("SELECT key, item_index, prompt_id, verdict FROM idempotency "
              "WHERE key IN (SELECT unnest(?::VARCHAR[]))")


class IdempotencyConflict(LedgerError):
    """An idempotency key was sent again with a different prompt at the same item index."""


def key_table(keys: Sequence[tuple[str, int, str]], prompt_ids: Sequence[str]) -> pa.Table:
    """(key, item index, verdict JSON) per attempt row, in row order → the `_keys` Arrow batch."""
    if len(keys) != len(prompt_ids):
        raise LedgerError(f"got {len(keys)} idempotency keys for {len(prompt_ids)} attempt rows")
    for key, index, _ in keys:
        if not key or len(key) > MAX_KEY_CHARS or index < 0:
            raise LedgerError(f"idempotency key must be 1..{MAX_KEY_CHARS} characters with index >= 0, "
                              f"got {key[:40]!r} index {index}")
    return pa.table([[k[0] for k in keys], pa.array([k[1] for k in keys], pa.int32()), list(prompt_ids),
                     [k[2] for k in keys]], schema=KEY_SCHEMA)


def claim(con: duckdb.DuckDBPyConnection, slot: object, keys: pa.Table) -> tuple[list[int], dict[int, str]]:
    """Inside an open transaction: claim the batch's pairs. Returns the row positions to append (first
    occurrence of each newly claimed pair) and, for every other row, the verdict JSON to answer with."""
    pairs = list(zip(keys["key"].to_pylist(), keys["item_index"].to_pylist()))
    first: dict[tuple[str, int], int] = {}
    for pos, pair in enumerate(pairs):
        first.setdefault(pair, pos)
    slot.table = keys.take(pa.array(sorted(first.values()), pa.int64())) if len(first) < len(pairs) else keys
    try:
        claimed = {(k, int(i)) for k, i in con.execute(CLAIM_SQL).fetchall()}
    finally:
        slot.table = KEY_SCHEMA.empty_table()
    verdicts, prompts = keys["verdict"].to_pylist(), keys["prompt_id"].to_pylist()
    stored = _stored(con, [p for p in first if p not in claimed])
    fresh, replayed = [], {}
    for pos, pair in enumerate(pairs):
        if pair in claimed:
            if first[pair] == pos:
                fresh.append(pos)
            else:
                replayed[pos] = verdicts[first[pair]]
            continue
        prompt_id, verdict = stored[pair]
        if prompt_id != prompts[pos]:
            raise IdempotencyConflict(
                f"idempotency key {pair[0]!r} item {pair[1]} was recorded for prompt {prompt_id!r}, "
                f"now sent with prompt {prompts[pos]!r}: use a new key for a new request")
        replayed[pos] = verdict
    return fresh, replayed


def _stored(con: duckdb.DuckDBPyConnection, pairs: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[str, str]]:
    if not pairs:
        return {}
    rows = con.execute(STORED_SQL, [sorted({k for k, _ in pairs})]).fetchall()
    wanted = set(pairs)
    found = {(k, int(i)): (p, v) for k, i, p, v in rows if (k, int(i)) in wanted}
    if len(found) != len(wanted):  # cannot happen under the write lock: a pair not claimed is stored
        raise LedgerError(f"{len(wanted) - len(found)} idempotency pair(s) neither claimed nor stored")
    return found
