"""`scalerl-env ledger query --run DIR`: answers while the trainer holds the ledger (its Parquet snapshots)
and after the run (the file), with the same table names, guard and time limit as the ledger itself."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scalerl.curriculum.ledger.snapshot_read import ReadersNote, read_note, write_note
from scalerl.curriculum.ledger.store import Ledger
from scalerl.trainer.run.ledger_readers import COST_FACTOR, MIN_EVERY_S, LedgerReaders

from tests.support.ledger_data import batch_rows

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
HARDEST = "SELECT prompt_id, scored, correct FROM pass_rates ORDER BY pass_rate, prompt_id"


def readme_query() -> str:
    """The README's example query, verbatim (the one this feature must answer during a run)."""
    readme = (REPO / "README.md").read_text()
    block = re.search(r"Query the ledger while training runs.*?```sql\n(.*?)```", readme, re.S)
    assert block, "README.md lost its example query"
    return block.group(1).strip()


def ledger_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real command in another process: DuckDB's file lock is per process."""
    return subprocess.run([str(BIN / "scalerl-env"), "ledger", *args], capture_output=True, text=True, timeout=timeout)


def query_json(sql: str, run: Path) -> subprocess.CompletedProcess:
    return ledger_cli("query", sql, "--run", str(run), "--format", "json")


def test_a_held_ledger_is_read_from_the_snapshot_with_the_ledgers_own_names(tmp_path):
    with Ledger(tmp_path / "ledger.duckdb") as ledger:
        for step in range(3):
            ledger.record_attempts(batch_rows(step))
        readers = LedgerReaders(ledger, tmp_path, "ledger.duckdb")
        expected = ledger.query(HARDEST).rows
        held = ledger_cli("query", HARDEST, "--ledger", str(tmp_path / "ledger.duckdb"))
        assert held.returncode == 2 and "held by another process" in held.stderr  # what --run fixes
        out = query_json(HARDEST, tmp_path)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["rows"] == expected and expected
        assert read_note(tmp_path).live and readers.last_cost_s > 0
        stats = ledger_cli("stats", "--run", str(tmp_path))
        assert stats.returncode == 0 and "attempts 192" in stats.stdout, stats.stderr


def test_the_snapshot_query_keeps_the_guard_and_reads_no_other_file(tmp_path):
    with Ledger(tmp_path / "ledger.duckdb") as ledger:
        ledger.record_attempts(batch_rows(0))
        LedgerReaders(ledger, tmp_path, "ledger.duckdb")
        for sql, message in [("DELETE FROM attempts", "only read statements"),
                             (f"SELECT * FROM read_csv('{REPO / 'README.md'}')",
                              "file system operations are disabled")]:
            out = query_json(sql, tmp_path)
            assert out.returncode == 2 and message in out.stderr, out.stderr


def test_after_the_run_the_file_itself_answers(tmp_path):
    with Ledger(tmp_path / "ledger.duckdb") as ledger:
        ledger.record_attempts(batch_rows(0))
        readers = LedgerReaders(ledger, tmp_path, "ledger.duckdb")
        ledger.record_attempts(batch_rows(1))  # after the only snapshot: only the file has it
    readers.close()
    assert not read_note(tmp_path).live
    out = query_json("SELECT count(*) FROM attempts", tmp_path)
    assert out.returncode == 0 and json.loads(out.stdout)["rows"] == [[128]], out.stderr


def test_a_note_left_live_by_a_dead_trainer_still_reads_the_file(tmp_path):
    with Ledger(tmp_path / "ledger.duckdb") as ledger:
        ledger.record_attempts(batch_rows(0))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    write_note(tmp_path, ReadersNote(min_every_s=2.0, pid=int(dead.stdout), host=os.uname().nodename, live=True))
    assert not read_note(tmp_path).held()
    out = query_json("SELECT count(*) FROM attempts", tmp_path)
    assert out.returncode == 0 and json.loads(out.stdout)["rows"] == [[64]], out.stderr


def test_a_folder_without_a_note_is_refused_with_the_alternative(tmp_path):
    out = query_json("SELECT 1", tmp_path)
    assert out.returncode == 2 and "--ledger FILE" in out.stderr


@pytest.mark.timeout(900)
def test_the_readme_query_answers_while_scalerl_train_writes_the_run(tmp_path):
    """The CPU default (its shipped warm start: RL begins after ~30 s), queried until rows come back."""
    run, log = tmp_path / "run", (tmp_path / "train.log").open("w")  # a file: a full pipe would stall the trainer
    train = subprocess.Popen([str(BIN / "scalerl"), "train", "--max-steps", "400", "--out", str(run),
                              "validation.enabled=false", "logging.progress=lines"],
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        rows, deadline = [], time.monotonic() + 600
        while not rows and time.monotonic() < deadline and train.poll() is None:
            time.sleep(2)
            if read_note(run) is not None:
                out = query_json(readme_query(), run)
                assert out.returncode == 0, out.stderr
                rows = json.loads(out.stdout)["rows"]
        assert train.poll() is None, Path(log.name).read_text()[-3000:]  # the run ended first
        assert rows and all(row[2] >= 8 for row in rows)  # scored
        assert read_note(run).held()
    finally:
        os.killpg(train.pid, signal.SIGKILL)
        train.wait()
        log.close()


def test_snapshots_are_spaced_by_their_own_cost(tmp_path):
    with Ledger(tmp_path / "ledger.duckdb") as ledger:
        ledger.record_attempts(batch_rows(0))
        readers = LedgerReaders(ledger, tmp_path, "ledger.duckdb")
        first = sorted((tmp_path / "ledger_snapshots").glob("snapshot-*"))
        for _ in range(20):  # steps far faster than the spacing: no snapshot between them
            readers.after_step()
        assert sorted((tmp_path / "ledger_snapshots").glob("snapshot-*")) == first and len(first) == 1
        readers._next_at = 0.0  # the spacing has passed
        readers.after_step()
        assert len(list((tmp_path / "ledger_snapshots").glob("snapshot-*"))) == 2
        assert readers._next_at - time.monotonic() > max(MIN_EVERY_S, COST_FACTOR * readers.last_cost_s) - 1.0
