"""Concurrency: reads during continuous writes (in process and through a real server), and `kill -9`
of an ingesting process loses no acknowledged batch and leaves a file that opens."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import httpx
import pytest
from scalerl.curriculum.ledger.store import Ledger
from scalerl.env.cli import build_app
from typer.testing import CliRunner

from tests.support.ledger_data import BATCH, batch_rows
from tests.support.server_harness import shared_server


def test_queries_see_whole_batches_while_a_writer_thread_appends(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as ledger:
        stop = threading.Event()
        written = []

        def writer() -> None:
            step = 0
            while not stop.is_set() and step < 400:
                ledger.record_attempts(batch_rows(step))
                written.append(step)
                step += 1

        thread = threading.Thread(target=writer)
        thread.start()
        seen = []
        try:
            while len(seen) < 30 or len(written) < 5:
                (n,) = ledger.query("SELECT count(*) FROM attempts").rows[0]
                rates = ledger.pass_rates()
                assert n % BATCH == 0  # a batch is one transaction: never half visible
                assert sum(r.attempts for r in rates.values()) % BATCH == 0
                seen.append(n)
        finally:
            stop.set()
            thread.join()
        assert seen == sorted(seen) and seen[-1] > seen[0]
        assert ledger.query("SELECT count(*) FROM attempts").rows == [[BATCH * len(written)]]


KILL_SCRIPT = textwrap.dedent("""
    import sys
    from scalerl.curriculum.ledger.store import Ledger
    from tests.support.ledger_data import batch_rows
    ledger = Ledger(sys.argv[1])
    step = 0
    while True:
        ledger.record_attempts(batch_rows(step, 512))
        print("ACK", step, flush=True)
        step += 1
""")


@pytest.mark.parametrize("acks_before_kill", [3, 40])
def test_kill_9_loses_no_acknowledged_batch(tmp_path, acks_before_kill):
    path = tmp_path / "l.duckdb"
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(path)], stdout=subprocess.PIPE, text=True,
                            cwd=os.getcwd(), env=env)
    acked = []
    try:
        for line in proc.stdout:
            acked.append(int(line.split()[1]))
            if len(acked) >= acks_before_kill:
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert len(acked) >= acks_before_kill, "the writer died before acknowledging enough batches"
    for read_only in (True, False):  # both open: DuckDB replays its write-ahead log
        with Ledger(path, read_only=read_only) as ledger:
            check_complete_batches(ledger, acked)


def check_complete_batches(ledger: Ledger, acked: list[int]) -> None:
    per_step = dict(ledger.query("SELECT step, count(*) FROM attempts GROUP BY step").rows)
    assert all(per_step.get(step) == 512 for step in acked)
    assert set(per_step.values()) == {512}  # a batch in flight at the kill is absent, not partial
    assert sum(r.attempts for r in ledger.pass_rates().values()) == 512 * len(per_step)


def test_cli_queries_a_running_server_while_it_records(request, tmp_path):
    server = shared_server(request, "main", "--ledger", str(tmp_path / "server.duckdb"))
    sql = "SELECT count(*) FROM attempts WHERE prompt_id LIKE 'e4-conc-%'"
    before = json.loads(CliRunner().invoke(build_app(), ["ledger", "query", sql, "--url", server.url,
                                                         "--format", "json"]).stdout)["rows"][0][0]
    done = threading.Event()
    acked = []

    def post_batches() -> None:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            for step in range(12):
                items = [{"id": f"{step}-{i}", "domain": "math", "completion": f"\\boxed{{{i % 2}}}", "answer": "1",
                          "prompt_id": f"e4-conc-{step % 4}", "step": step, "sample_index": i} for i in range(16)]
                client.post("/v1/verify", json={"items": items}).raise_for_status()
                acked.append(step)
        done.set()

    thread = threading.Thread(target=post_batches)
    thread.start()
    counts = []
    try:
        while not done.is_set():
            out = CliRunner().invoke(build_app(), ["ledger", "query", sql, "--url", server.url, "--format", "json"])
            assert out.exit_code == 0, out.output
            counts.append(json.loads(out.stdout)["rows"][0][0] - before)
            time.sleep(0.05)
    finally:
        thread.join()
    assert counts and counts == sorted(counts) and all(c % 16 == 0 for c in counts)
    out = CliRunner().invoke(build_app(), ["ledger", "query", sql, "--url", server.url, "--format", "csv"])
    assert out.stdout.splitlines()[1] == str(before + 16 * len(acked))
    stats = CliRunner().invoke(build_app(), ["ledger", "stats", "--url", server.url])
    assert stats.exit_code == 0 and "pass-rate histogram, math" in stats.stdout
    refused = CliRunner().invoke(build_app(), ["ledger", "query", "DROP TABLE attempts", "--url", server.url])
    assert refused.exit_code == 2 and "400" in refused.stderr
