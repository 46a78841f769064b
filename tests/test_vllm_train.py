"""`scalerl train --engine vllm`: a short run of the tiny model through real vLLM (CPU build) completes.

It checks the wiring (engine factory, in-flight pushes every step, per-token versions within the lag
bound, metrics as with the torch engine); learning is checked on the torch engine (E8's e2e test),
and a vLLM run long enough to show it does not fit this suite's budget.
"""

from __future__ import annotations

import pytest

pytest.importorskip("vllm", reason="the vLLM tests run in .venv-vllm (make test-vllm)")

from typer.testing import CliRunner

from trainer.cli import build_app
from trainer.run_log import read_metrics

pytestmark = pytest.mark.vllm
K = 2


def test_short_vllm_training_run_completes_with_pushes_in_flight(tmp_path):
    out = tmp_path / "run"
    args = [
        "train",
        "--engine",
        "vllm",
        "--out",
        str(out),
        "--max-steps",
        "6",
        f"pipeline.k={K}",
        "pipeline.prompts_per_step=8",
        "pipeline.samples_per_prompt=4",
        "validation.enabled=false",
        "warm_start.steps=40",
        "data.generated_per_domain=300",
        "engine.max_slots=64",
        "verifier.math.workers=1",
        "verifier.code.slots=1",
        "logging.progress=lines",
    ]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    steps = read_metrics(out / "metrics.jsonl", "step")
    assert [r["step"] for r in steps] == list(range(1, 7))
    assert [r["policy_version"] for r in steps] == list(range(1, 7))
    lags = [r["lag/max"] for r in steps if r["lag/max"] is not None]
    assert not lags or max(lags) <= K
    assert any(r["push_s"] is not None and r["push_s"] > 0 for r in steps)
    assert (out / "generator_model" / "config.json").exists()
