"""Parquet snapshots: complete, consistent, readable by another process while the owner holds the file."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from scalerl.curriculum.ledger.snapshot import PeriodicSnapshotter
from scalerl.curriculum.ledger.store import Ledger
from scalerl.env.cli import build_app
from typer.testing import CliRunner

from tests.support.ledger_data import batch_rows

READER = textwrap.dedent("""
    import sys, duckdb
    d = sys.argv[1]
    print(duckdb.sql(f"SELECT count(*) FROM '{d}/attempts.parquet'").fetchall()[0][0],
          duckdb.sql(f"SELECT sum(attempts) FROM '{d}/pass_rates.parquet'").fetchall()[0][0])
""")


def test_snapshot_is_readable_by_another_process_while_the_owner_holds_the_lock(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as ledger:
        for step in range(5):
            ledger.record_attempts(batch_rows(step))
        snap = ledger.snapshot(tmp_path / "snaps")
        out = subprocess.run([sys.executable, "-c", READER, str(tmp_path / "snaps" / "latest")], check=True,
                             capture_output=True, text=True).stdout.split()
        assert out == ["320", "320"]
        assert (tmp_path / "snaps" / "latest").resolve() == snap.resolve()
        assert not list((tmp_path / "snaps").glob(".tmp-*"))


def test_old_snapshots_are_pruned_and_latest_moves(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as ledger:
        paths = []
        for step in range(4):
            ledger.record_attempts(batch_rows(step))
            paths.append(ledger.snapshot(tmp_path / "snaps", keep=2))
    kept = sorted(p.name for p in (tmp_path / "snaps").glob("snapshot-*"))
    assert kept == sorted(p.name for p in paths[-2:])
    assert (tmp_path / "snaps" / "latest").resolve() == paths[-1].resolve()


def test_periodic_snapshotter_writes_while_running(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as ledger:
        ledger.record_attempts(batch_rows(0))
        snapper = PeriodicSnapshotter(ledger, tmp_path / "snaps", interval_s=0.2).start()
        try:
            deadline = time.monotonic() + 30
            while not (tmp_path / "snaps" / "latest").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            snapper.stop()
    assert (tmp_path / "snaps" / "latest" / "manifest.json").exists()


def test_cli_snapshot_of_a_closed_ledger(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as ledger:
        ledger.record_attempts(batch_rows(0))
    out = CliRunner().invoke(build_app(), ["ledger", "snapshot", "--ledger", str(tmp_path / "l.duckdb"),
                                           "--out", str(tmp_path / "snaps")])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "snaps" / "latest" / "retired.parquet").exists()
