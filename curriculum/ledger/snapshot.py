"""Atomic Parquet snapshots of the ledger, readable by any process without touching the DuckDB lock.

Layout under `out_dir`:
```
out_dir/snapshot-20261129T105500123456Z/{attempts,problems,pass_rates,retired,epochs}.parquet + manifest.json
out_dir/latest -> snapshot-...   (symlink, replaced atomically)
```
Guarantees: every table of one snapshot comes from one DuckDB transaction (a consistent point in
time); a snapshot directory appears only complete (written as `.tmp-*`, fsynced, then renamed), and
`latest` always points at a complete one. Readers: `duckdb.sql("SELECT * FROM 'out/latest/pass_rates.parquet'")`,
or the ledger's own SQL over a snapshot with `scalerl.curriculum.ledger.snapshot_read.query_snapshot`.
Older snapshots beyond `keep` are deleted; a reader holding one open may see it vanish (copy it to keep it).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import threading
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

logger = logging.getLogger(__name__)

TABLES = {
    "attempts": "SELECT * FROM attempts",
    "problems": "SELECT * FROM problems",
    "pass_rates": "SELECT * FROM pass_rates ORDER BY prompt_id",
    "retired": "SELECT * FROM retired",
    "epochs": "SELECT * FROM epochs",
}


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_snapshot(cur: duckdb.DuckDBPyConnection, out_dir: Path, *, keep: int = 3) -> Path:
    """Write one snapshot from the cursor's database; returns the snapshot directory."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    final = out_dir / f"snapshot-{stamp}"
    tmp = out_dir / f".tmp-snapshot-{stamp}"
    tmp.mkdir()
    try:
        cur.execute("BEGIN TRANSACTION")
        try:
            tables = {name: cur.sql(sql).to_arrow_table() for name, sql in TABLES.items()}
        finally:
            cur.execute("COMMIT")
        for name, table in tables.items():
            pq.write_table(table, tmp / f"{name}.parquet")
        manifest = {"created_at": stamp, "rows": {n: t.num_rows for n, t in tables.items()}}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
        for child in tmp.iterdir():
            with open(child, "rb") as fh:
                os.fsync(fh.fileno())
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    link_tmp = out_dir / f".latest-{stamp}"
    os.symlink(final.name, link_tmp)
    os.replace(link_tmp, out_dir / "latest")
    _fsync_dir(out_dir)
    _prune(out_dir, keep)
    logger.info("ledger snapshot %s (%s)", final, manifest["rows"])
    return final


def _prune(out_dir: Path, keep: int) -> None:
    snaps = sorted(p for p in out_dir.glob("snapshot-*") if p.is_dir())
    for old in snaps[: max(0, len(snaps) - keep)]:
        shutil.rmtree(old, ignore_errors=True)


class PeriodicSnapshotter:
    """Writes a snapshot of `ledger` every `interval_s` seconds on a daemon thread (owner side)."""

    def __init__(self, ledger, out_dir: str | Path, *, interval_s: float = 300.0, keep: int = 3) -> None:
        self.ledger, self.out_dir, self.interval_s, self.keep = ledger, Path(out_dir), interval_s, keep
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ledger-snapshots", daemon=True)

    def start(self) -> PeriodicSnapshotter:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.ledger.snapshot(self.out_dir, keep=self.keep)
            except Exception:  # a failed snapshot must not kill the owner; the next one retries
                logger.exception("ledger snapshot failed")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
