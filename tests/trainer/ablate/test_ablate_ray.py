"""`scalerl ablate --ray-address local`: the runs execute as Ray tasks on a real local cluster.

Two seeds of the baseline with a small budget on the CPU default. Each run must finish in a Ray
worker process (not the calling one), the manifest and report must be written as in the sequential
path, and the cluster the command started must be gone when it returns.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from scalerl.trainer.cli import build_app
from scalerl.trainer.run.log import read_metrics
from typer.testing import CliRunner

ray = pytest.importorskip("ray", reason="ray is a dependency of the main environment")

# A cold machine pays the CPU default's warm start inside the first Ray task (~5 min on idle 2 cores).
pytestmark = pytest.mark.timeout(2400)

BUDGET = 6.0


def test_runs_execute_as_ray_tasks_and_the_cluster_is_stopped(tmp_path: Path) -> None:
    out = tmp_path / "study"
    args = ["ablate", "--variants", "baseline", "--seeds", "2", "--budget", str(BUDGET), "--out", str(out),
            "--ray-address", "local", "--eval-samples", "64", "pipeline.prompts_per_step=4",
            "pipeline.samples_per_prompt=4", "validation.every_steps=3", "checkpoint.every_steps=1000"]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output + repr(result.exception)

    manifest = json.loads((out / "manifest.json").read_text())
    assert [(r["seed"], r["status"]) for r in manifest["runs"]] == [(0, "finished"), (1, "finished")]
    for run in manifest["runs"]:
        host, pid = run["worker"].rsplit(":", 1)
        assert int(pid) != os.getpid()  # trained in a Ray worker, not in this process
        steps = read_metrics(out / run["folder"] / "metrics.jsonl", "step")
        assert steps[-1]["compute_device_s"] >= BUDGET
        assert run["steps"] == steps[-1]["step"]
    assert (out / "report.md").is_file() and (out / "figures" / "heldout.png").stat().st_size > 0
    assert not ray.is_initialized()  # the cluster `local` started is stopped again
