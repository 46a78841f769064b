"""`scalerl train --engine vllm lora.enabled=true`: vLLM (CPU build) serves the merged policy of a LoRA trainer.

Three steps of the shortened CPU default with a push after each: the pushes reach vLLM (policy versions
1..3, lag within k), validation runs on the vLLM engine, and the checkpoint holds moved adapters.
"""

from __future__ import annotations

import pytest

pytest.importorskip("vllm", reason="the vLLM tests run in .venv-vllm (make test-vllm)")

from safetensors.torch import load_file
from typer.testing import CliRunner

from trainer.cli import build_app
from trainer.run.log import read_metrics

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(1800)]  # ~5 min on 2 loaded cores


def test_a_lora_run_pushes_merged_weights_to_vllm(tmp_path):
    from trainer.core.lora import ADAPTER_FILE

    out = tmp_path / "run"
    args = ["train", "--engine", "vllm", "--out", str(out), "--max-steps", "3", "lora.enabled=true",
            "optim.lr=1e-3", "pipeline.k=1", "pipeline.max_time_s=null", "pipeline.prompts_per_step=4",
            "validation.every_steps=3", "validation.min_evaluations_per_domain=8", "checkpoint.every_steps=3",
            "logging.progress=lines"]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    steps = read_metrics(out / "metrics.jsonl", "step")
    assert [r["policy_version"] for r in steps] == [1, 2, 3]
    assert any(r["push_s"] is not None and r["push_s"] > 0 for r in steps)
    assert [v["step"] for v in read_metrics(out / "metrics.jsonl", "validation")] == [0, 3]
    adapters = load_file(str(out / "checkpoints" / (out / "checkpoints" / "latest").read_text().strip() / ADAPTER_FILE))
    assert any(float(v.abs().max()) > 0 for k, v in adapters.items() if "lora_B" in k)
