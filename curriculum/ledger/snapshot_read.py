"""Reading the ledger's Parquet snapshots (`scalerl.curriculum.ledger.snapshot`) with the ledger's own SQL, and
the note by which an owner announces them to readers of its folder (`ledger_readers.json`).

Guarantees: `query_snapshot` answers over one complete snapshot, in an in-memory DuckDB whose tables carry the
ledger's names (`attempts`, `problems`, `pass_rates`, `retired`, `epochs`), with `Ledger.query`'s guard (one
SELECT) and time limit, and with file access switched off for the SQL; it loads the tables before it runs
the SQL, so an owner pruning the snapshot afterwards does not disturb it. The note is replaced atomically.
Not guaranteed: the owner's latest rows (a snapshot is as old as its writer's spacing), or tables a
snapshot does not carry.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
from scalerl.curriculum.ledger.models import LedgerError, QueryResult
from scalerl.curriculum.ledger.store import run_query
from scalerl.env.contracts.records import Strict

READERS_NOTE = "ledger_readers.json"


class ReadersNote(Strict):
    """What a ledger's owner offers readers who cannot open the file (it holds DuckDB's lock): written by the
    trainer into its run folder as `ledger_readers.json`, read by `scalerl-env ledger query --run DIR`."""

    ledger: str = "ledger.duckdb"  # the ledger file, relative to the run folder
    snapshots: str = "ledger_snapshots"  # the snapshot folder (`latest` inside), relative to the run folder
    min_every_s: float  # the shortest time between two snapshots
    pid: int  # the owner's process, on `host`
    host: str
    live: bool  # the owner holds the ledger file (false once it has closed it)

    def held(self) -> bool:
        """Whether the owner still holds the file: `live`, and its process is running (or on another host)."""
        if not self.live or self.host != socket.gethostname():
            return self.live
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False  # the owner died without closing the note
        except PermissionError:
            pass
        return True


def write_note(run_dir: Path, note: ReadersNote) -> None:
    """Replace `run_dir/ledger_readers.json` atomically (a reader sees the old note or the new one)."""
    tmp = run_dir / f".{READERS_NOTE}.tmp"
    tmp.write_text(note.model_dump_json(indent=2))
    os.replace(tmp, run_dir / READERS_NOTE)


def read_note(run_dir: Path) -> ReadersNote | None:
    """The run folder's note, or None when it has none (not a trainer's run folder)."""
    try:
        return ReadersNote.model_validate_json((run_dir / READERS_NOTE).read_text())
    except FileNotFoundError:
        return None



def latest_snapshot(out_dir: str | Path) -> Path | None:
    """The complete snapshot `out_dir/latest` points at, or None when none was written yet."""
    link = Path(out_dir) / "latest"
    try:
        return link.resolve(strict=True)
    except OSError:
        return None


def query_snapshot(snapshot: Path, sql: str, *, timeout_s: float = 10.0, max_rows: int = 100_000) -> QueryResult:
    """One read-only statement over a snapshot, in an in-memory DuckDB whose tables carry the ledger's names
    (`pass_rates`, `attempts`, ...): the guard and time limit of `Ledger.query`, and no file access for the SQL."""
    tables = {}
    for path in sorted(snapshot.glob("*.parquet")):
        try:
            tables[path.stem] = pq.read_table(path)
        except OSError as exc:  # pruned under us by the owner (`keep`)
            raise LedgerError(f"snapshot {snapshot} vanished while it was read ({exc}); query again") from exc
    con = duckdb.connect(":memory:")
    try:
        for name, table in tables.items():
            con.register(name, table)
        con.execute("SET enable_external_access = false")  # the user's SQL reads these tables, nothing else
        return run_query(con, sql, timeout_s=timeout_s, max_rows=max_rows)
    finally:
        con.close()
