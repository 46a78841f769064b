"""`scalerl train --engine vllm`: the CPU default, shortened, through real vLLM (CPU build) completes and learns.

One run checks the wiring (engine factory, in-flight pushes every step, per-token versions within the
lag bound, metrics as with the torch engine) and learning: the held-out pass rate averaged over math
and code (validation runs on the run's vLLM engine, after each push) rises. Averaging halves the noise of a short run;
each domain separately is asserted on the torch engine (tests/trainer/test_train_e2e.py; ~+0.1 each in 60 steps).
The default warm start is shared with the main suite through the user cache (`make test` runs the main
suite first); run alone on a fresh machine, this test first pays the warm start (~4-5 min on 2 cores).
"""

from __future__ import annotations

import pytest

pytest.importorskip("vllm", reason="the vLLM tests run in .venv-vllm (make test-vllm)")

from scalerl.trainer.cli import build_app
from scalerl.trainer.run.log import read_metrics
from typer.testing import CliRunner

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(2400)]
K, STEPS, N_EVAL = 2, 60, 1024


def test_vllm_training_run_learns_with_pushes_in_flight(tmp_path):
    out = tmp_path / "run"
    args = [
        "train", "--engine", "vllm", "--out", str(out), "--max-steps", str(STEPS),
        f"pipeline.k={K}", "pipeline.max_time_s=null",
        f"validation.every_steps={STEPS}", f"validation.min_evaluations_per_domain={N_EVAL}",
        "logging.progress=lines",
    ]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    steps = read_metrics(out / "metrics.jsonl", "step")
    assert [r["step"] for r in steps] == list(range(1, STEPS + 1))
    assert [r["policy_version"] for r in steps] == list(range(1, STEPS + 1))
    lags = [r["lag/max"] for r in steps if r["lag/max"] is not None]
    assert lags and max(lags) <= K
    assert any(r["push_s"] is not None and r["push_s"] > 0 for r in steps)
    assert (out / "generator_model" / "config.json").exists()
    vals = read_metrics(out / "metrics.jsonl", "validation")
    first, last = ({d: v["val"][d]["pass_rate"] for d in ("math", "code")} for v in (vals[0], vals[-1]))
    rise = sum(last[d] - first[d] for d in first) / 2
    assert rise > 0.04, f"held-out pass rate {first} -> {last}"  # 3 standard errors of the mean rise
