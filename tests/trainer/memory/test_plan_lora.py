"""The memory plan with `lora.enabled`: gradients and AdamW states for the adapters only, the adapters and
the plain mirror added, the adapter count equal to PEFT's on the `transformers` model of the shape."""

from __future__ import annotations

import json

import pytest
import torch
from scalerl.env.contracts.config_loader import load_config
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.core.lora import apply_lora, count_adapter_params
from scalerl.trainer.core.lora_config import LoraConfig
from scalerl.trainer.memory.lora import adapter_params
from scalerl.trainer.memory.preflight import plan_for, shapes_dir
from scalerl.trainer.memory.shapes import ModelShape


@pytest.mark.parametrize("shape_name", ["smollm2-135m", "qwen2.5-1.5b"])
@pytest.mark.parametrize("targets", [None, ["q_proj", "v_proj"]])
def test_adapter_count_equals_peft_on_the_transformers_model(shape_name, targets):
    from transformers import AutoConfig, AutoModelForCausalLM

    config = json.loads((shapes_dir() / shape_name / "config.json").read_text())
    config.update(num_hidden_layers=2, vocab_size=64)  # the adapters do not depend on either beyond the count
    lora = LoraConfig(enabled=True, rank=8, **({"target_modules": targets} if targets else {}))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config))
    apply_lora(model, lora)
    assert adapter_params(ModelShape.from_dict(config), lora) == count_adapter_params(model)


def test_the_plan_counts_gradients_and_optimizer_states_for_the_adapters_only():
    base = ["model=smollm2-135m-instruct", "engine.device=cpu"]
    full, _ = plan_for(load_config(TrainConfig, None, base).plan_inputs())
    lora, _ = plan_for(load_config(TrainConfig, None, [*base, "lora.enabled=true", "lora.rank=8"]).plan_inputs())
    shape = ModelShape.from_folder(shapes_dir() / "smollm2-135m")
    n = adapter_params(shape, LoraConfig(enabled=True, rank=8))
    assert 0 < n < shape.params // 20
    assert lora.term("gradients").bytes == n * 4 and lora.term("optimizer states").bytes == 2 * n * 4
    assert full.term("gradients").bytes == shape.params * 4
    assert lora.term("lora adapters").bytes == n * 4 and lora.term("mirror").bytes == shape.params * 4
    assert lora.term("parameters").bytes == full.term("parameters").bytes
    assert not [t for t in full.terms if t.name in ("lora adapters", "mirror")]
    saved = full.total("cpu") - lora.total("cpu")
    # full: gradients 4P + AdamW 8P; LoRA: gradients 4n + AdamW 8n + adapters 4n + mirror 4P
    assert saved == 8 * shape.params - 16 * n


def test_vllm_serving_the_adapters_puts_its_lora_slot_in_a_note_not_a_term():
    from scalerl.trainer.memory.lora import vllm_lora_slot_bytes

    base = [f"model={shapes_dir() / 'qwen2.5-1.5b'}", "engine.name=vllm", "lora.enabled=true",
            "engine.device_memory_gib=80", "engine.device=cuda", "engine.dtype=bfloat16"]
    with_slot, _ = plan_for(load_config(TrainConfig, None, base).plan_inputs())
    merged, _ = plan_for(load_config(TrainConfig, None, [*base, "lora.vllm_adapters=false"]).plan_inputs())
    assert [t.bytes for t in with_slot.terms] == [t.bytes for t in merged.terms]  # inside the vLLM share
    shape = ModelShape.from_folder(shapes_dir() / "qwen2.5-1.5b")
    n = vllm_lora_slot_bytes(shape, LoraConfig(enabled=True), "bfloat16")
    # Qwen2.5-1.5B: 28 layers x 16 x (7 projections' in + out) x 2 B
    assert n == 28 * 16 * (3 * 1536 + 1536 + 2 * 256 + 2 * 1536 + 2 * (1536 + 8960) + 8960 + 1536) * 2
    assert [x for x in with_slot.notes if "vLLM LoRA slot" in x] == [
        f"vLLM LoRA slot: {n / 2**20:.1f} MiB (max_lora_rank 16, bfloat16) inside the vLLM share: it shrinks "
        "vLLM's KV cache, not the trainer's memory"]
    assert not [x for x in merged.notes if "LoRA slot" in x]
