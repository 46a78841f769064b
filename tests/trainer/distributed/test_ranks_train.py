"""`scalerl train --trainer-ranks 2`: the CPU default's loop, engine, verifiers and ledger with two
trainer ranks (rank 1 a child process), shortened to 3 steps of 4 prompts, completes with metrics and a
sharded checkpoint, and resumes with one rank (`slow`). ~1 min of CPU time; far longer on shared cores.

The warm start is off so the test does not depend on (or spend ~5 min filling) the warm-start cache;
the zero-variance filter is off too, so every step trains on its groups through the sharded update
(a random model's groups all score 0). Learning with ranks is the equivalence tests' business.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from scalerl.trainer.run.log import read_metrics

pytestmark = pytest.mark.timeout(1200)
ARGS = ["warm_start.enabled=false", "curriculum.zero_variance.mode=keep", "pipeline.prompts_per_step=4",
        "pipeline.max_time_s=null", "validation.every_steps=2", "validation.min_evaluations_per_domain=8",
        "validation.fit_at_end=false", "checkpoint.every_steps=2", "logging.progress=lines",
        "trainer_ranks.timeout_s=300"]


def scalerl(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", "from scalerl.trainer.cli import main; main()", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1100)


@pytest.fixture(scope="module")
def two_rank_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ranks") / "run"
    proc = scalerl("train", "--trainer-ranks", "2", "--max-steps", "3", "--out", str(out), *ARGS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_two_rank_run_writes_metrics_and_sharded_checkpoints(two_rank_run):
    steps = read_metrics(two_rank_run / "metrics.jsonl", "step")
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert all(s["push/gather_s"] > 0 and s["ranks/grad_norm_spread"] == 0.0 for s in steps)
    assert read_metrics(two_rank_run / "metrics.jsonl", "validation")
    ckpt = two_rank_run / "checkpoints" / "step_000003"
    assert (ckpt / "sharded").is_dir() and (ckpt / "model.safetensors").is_file() and (ckpt / "ledger.duckdb").is_file()
    assert json.loads((ckpt / "trainer_state.json").read_text())["extra"]["trainer_ranks"] == 2
    assert (two_rank_run / "ranks" / "rank-1.log").is_file()


@pytest.mark.slow  # a second run of the CLI; the resharding itself is in test_ranks_equivalence.py
def test_two_rank_run_resumes_with_one_rank(two_rank_run):
    proc = scalerl("train", "--resume", str(two_rank_run), "--trainer-ranks", "1", "--max-steps", "4")
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = read_metrics(two_rank_run / "metrics.jsonl", "step")
    assert [s["step"] for s in steps] == [1, 2, 3, 4]
    assert "push/gather_s" not in steps[-1]  # one rank: no gather
