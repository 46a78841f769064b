"""`scalerl train --engine vllm lora.enabled=true`: vLLM (CPU build) serves the trainer's adapters through its LoRA.

Three synchronous steps (`pipeline.k=0`) of the shortened CPU default with a push of the adapters after
each: every trained token was sampled by the policy the trainer scores it under, so the importance
ratio is 1 up to the engines' numerics (bound 1e-3; a vLLM serving the base model, or the merged
weights with the adapters on top, is off by far more once the adapters move). The engine's folder
holds the base weights (the adapters are not merged into it), validation runs on the vLLM engine,
and the checkpoint holds moved adapters.
"""

from __future__ import annotations

import pytest

pytest.importorskip("vllm", reason="the vLLM tests run in .venv-vllm (make test-vllm)")

import torch
from safetensors.torch import load_file
from scalerl.trainer.cli import build_app
from scalerl.trainer.run.log import read_metrics
from typer.testing import CliRunner

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]  # 60 s measured on 2 cores (load 1.4-3.3)


def test_a_lora_run_pushes_adapters_to_vllm_and_trains_on_policy(tmp_path):
    from scalerl.trainer.core.lora import ADAPTER_FILE

    out = tmp_path / "run"
    args = ["train", "--engine", "vllm", "--out", str(out), "--max-steps", "3", "lora.enabled=true",
            "optim.lr=1e-3", "pipeline.k=0", "pipeline.max_time_s=null", "pipeline.prompts_per_step=4",
            "validation.every_steps=3", "validation.min_evaluations_per_domain=8", "checkpoint.every_steps=3",
            "logging.progress=lines"]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    steps = read_metrics(out / "metrics.jsonl", "step")
    assert [r["policy_version"] for r in steps] == [1, 2, 3]
    assert all(r["push_s"] is not None and r["push_s"] > 0 for r in steps)
    for r in steps:  # on-policy: ratio 1 within the engines' numerics (fp32, FP32 head)
        assert abs(r["ratio/min"] - 1) < 1e-3 and abs(r["ratio/max"] - 1) < 1e-3, r
    assert [v["step"] for v in read_metrics(out / "metrics.jsonl", "validation")] == [0, 3]
    ckpt = out / "checkpoints" / (out / "checkpoints" / "latest").read_text().strip()
    adapters = load_file(str(ckpt / ADAPTER_FILE))
    assert any(float(v.abs().max()) > 0 for k, v in adapters.items() if "lora_B" in k)
    served, merged = load_file(str(out / "generator_model" / "model.safetensors")), load_file(
        str(ckpt / "model.safetensors"))
    moved = [k for k in served if "proj" in k and not torch.equal(served[k], merged[k])]
    assert moved, "the engine's folder must hold the base weights, the checkpoint the merged policy"
