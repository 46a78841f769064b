"""The curriculum service's tables in the ledger (schema version 6): registered sets, members, draws.

Each write is one transaction on the owner's connection under the ledger's write lock (the same lock
its attempt batches take), so a set is registered whole or not at all, and a draw is committed together
with the sampler state it leaves, before the service answers it. Reads run on their own cursor. These
functions use the `Ledger`'s connection and lock directly: they are the ledger's own tables, written
only by `scalerl.curriculum.service`.
Not guaranteed: that a set's Parquet file still holds what it held at registration (the members and
their records are copied into the ledger, so a restart never rereads it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from scalerl.curriculum.ledger.store import Ledger

MEMBER_SCHEMA = pa.schema([("set_name", pa.string()), ("prompt_id", pa.string()), ("domain", pa.string()),
                           ("source", pa.string()), ("split", pa.string()), ("record", pa.string())])


def _write(ledger: Ledger, work: Any) -> None:
    """Run `work(con)` in one transaction on the owner's connection (rolled back on any error)."""
    ledger._check_writable()
    with ledger._write_lock:
        con = ledger._con
        con.execute("BEGIN TRANSACTION")
        try:
            work(con)
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise


def _read(ledger: Ledger, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
    cur = ledger._cursor()
    try:
        return cur.execute(sql, list(params)).fetchall()
    finally:
        cur.close()


def save_set(ledger: Ledger, name: str, seed: int, domain_weights: dict[str, float], settings: dict[str, Any],
             members: Sequence[tuple[str, str, str, str, str | None]]) -> None:
    """Register a set: its row and its members ((prompt_id, domain, source, split, record JSON | None))."""
    table = pa.Table.from_pylist([dict(zip(MEMBER_SCHEMA.names, (name, *m))) for m in members], MEMBER_SCHEMA)

    def work(con: Any) -> None:
        con.execute("INSERT INTO curriculum_sets (name, seed, domain_weights, settings) VALUES (?, ?, ?, ?)",
                    [name, seed, json.dumps(domain_weights, sort_keys=True), json.dumps(settings, sort_keys=True)])
        con.register("_members", table)
        try:
            con.execute("INSERT INTO curriculum_members SELECT * FROM _members")
        finally:
            con.unregister("_members")

    _write(ledger, work)


def load_sets(ledger: Ledger) -> list[tuple[str, int, dict[str, float], dict[str, Any]]]:
    """[(name, seed, domain_weights, settings)] of every registered set, by name."""
    rows = _read(ledger, "SELECT name, seed, domain_weights, settings FROM curriculum_sets ORDER BY name")
    return [(name, int(seed), json.loads(w), json.loads(s)) for name, seed, w, s in rows]


def load_members(ledger: Ledger, name: str) -> list[tuple[str, str, str, str, str | None]]:
    """The set's members, by prompt_id."""
    return _read(ledger, "SELECT prompt_id, domain, source, split, record FROM curriculum_members "
                 "WHERE set_name = ? ORDER BY prompt_id", [name])


def save_draw(ledger: Ledger, name: str, draw_id: int, world_size: int, n: int, prompt_ids: Sequence[str],
              batches: int, sampler: tuple[str, dict[str, Any]] | None = None,
              new_epochs: Sequence[tuple] = ()) -> None:
    """Commit a draw and, in the same transaction, the sampler state it left (`sampler` = (name, state))
    and the epochs it started: the rows `Ledger.save_sampler_state` writes, so a crash leaves either the
    draw and its sampler state or neither."""
    def work(con: Any) -> None:
        if sampler is not None:
            con.execute("INSERT OR REPLACE INTO sampler_state (name, state, updated_at) VALUES (?, ?, now())",
                        [sampler[0], json.dumps(sampler[1])])
            for domain, epoch, active, retired_before in new_epochs:
                con.execute("INSERT OR REPLACE INTO epochs (sampler, domain, epoch, active_prompts, retired_before) "
                            "VALUES (?, ?, ?, ?, ?)", [sampler[0], domain, epoch, active, retired_before])
        con.execute("INSERT INTO curriculum_draws (set_name, draw_id, world_size, n, prompt_ids, batches) "
                    "VALUES (?, ?, ?, ?, ?, ?)", [name, draw_id, world_size, n, json.dumps(list(prompt_ids)), batches])

    _write(ledger, work)
    for domain, epoch, *_ in new_epochs:  # the epoch a retirement is stamped with, as save_sampler_state keeps it
        ledger._epochs[domain] = max(epoch, ledger._epochs.get(domain, epoch))


def load_draws(ledger: Ledger, name: str) -> dict[int, tuple[int, int, list[str], int]]:
    """draw_id -> (world_size, n, prompt ids of every rank in rank order, sampler batch count before it)."""
    rows = _read(ledger, "SELECT draw_id, world_size, n, prompt_ids, batches FROM curriculum_draws "
                 "WHERE set_name = ?", [name])
    return {int(d): (int(w), int(n), json.loads(ids), int(b)) for d, w, n, ids, b in rows}
