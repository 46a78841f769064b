"""Kill -9 a training run after a checkpoint, resume it, and check that steps, ledger and sampler agree."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from scalerl.trainer.run.log import read_metrics

pytestmark = pytest.mark.timeout(2400)
P, N = 8, 8
ARGS = [f"pipeline.prompts_per_step={P}", f"pipeline.samples_per_prompt={N}", "checkpoint.every_steps=2",
        "validation.enabled=false", "logging.progress=lines"]


def scalerl(*args: str) -> list[str]:
    return [sys.executable, "-c", "from scalerl.trainer.cli import main; main()", *args]


# A cold warm-start cache costs the first run ~6-10 min on 2 cores before any RL step, so the wait is long.
def wait_for_checkpoint(out: Path, proc: subprocess.Popen, min_step: int, timeout_s: float = 1200) -> None:
    deadline = time.monotonic() + timeout_s
    latest = out / "checkpoints" / "latest"
    while time.monotonic() < deadline:
        if latest.exists() and int(latest.read_text().strip().split("_")[1]) >= min_step:
            return
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        time.sleep(0.2)
    raise AssertionError("no checkpoint in time")


def test_kill_and_resume_keeps_steps_ledger_and_sampler_consistent(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.Popen(scalerl("train", "--out", str(out), "--max-steps", "40", *ARGS), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_for_checkpoint(out, proc, 4)
        time.sleep(1.0)  # let it get past the checkpoint: the killed steps must be rolled back
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    killed_at = len(read_metrics(out / "metrics.jsonl", "step"))
    done = subprocess.run(scalerl("train", "--resume", str(out), "--max-steps", "8"), env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [r["step"] for r in read_metrics(out / "metrics.jsonl", "step")]
    assert steps == list(range(1, 9)), f"killed at {killed_at}, steps after resume {steps}"
    with duckdb.connect(str(out / "ledger.duckdb"), read_only=True) as con:
        per_step = con.execute("SELECT step, count(*) FROM attempts GROUP BY step ORDER BY step").fetchall()
        batches = con.execute("SELECT state FROM sampler_state").fetchall()
    assert per_step == [(s, P * N) for s in range(1, 9)], "each step's attempts exactly once"
    assert batches, "the sampler state lives in the ledger"
