"""Build the generation engine that `engine.name` names, from an in-memory Hugging Face model.

- `torch`: `TorchEngine` on the model itself (weights copied), on `engine.device`.
- `vllm`: the model is written as a Hugging Face folder (`save_pretrained`, safetensors) under
  `work_dir` and served by `VLLMEngine` (needs vLLM installed: `make vllm-env`). The folder is what
  the vLLM worker loads; later weights arrive in flight (`update_weights`), not through the folder.
  A model that holds LoRA adapters (`scalerl.trainer.core.lora`, given only under `lora_config.pushes_adapters`)
  is written as its base weights and vLLM serves its adapters through its own LoRA loading
  (`scalerl.trainer.engines.vllm_lora`); the pushes then carry adapters.

Guarantee: both engines get the same sampling settings (dtype, FP32 head, slots, sequence length, seed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scalerl.trainer.engines.base import GenerationEngine


def build_engine(
    cfg: Any,
    model: Any,
    eos_token_id: int,
    *,
    device: str,
    policy_version: int,
    seed: int,
    work_dir: str | Path,
) -> GenerationEngine:
    """`cfg` is a `TrainConfig`; `work_dir` holds the vLLM model folder (unused by the torch engine)."""
    e = cfg.engine
    if e.name == "torch":
        return build_torch_engine(cfg, model, eos_token_id, device=device, policy_version=policy_version, seed=seed)
    if e.name == "vllm":
        from scalerl.trainer.core.lora import adapter_state_dict, base_state_dict, has_lora
        from scalerl.trainer.core.lora_config import pushes_adapters
        from scalerl.trainer.engines.vllm_engine import VLLMEngine

        folder = Path(work_dir) / "generator_model"
        lora = has_lora(model)
        if lora and not pushes_adapters(cfg):
            raise ValueError("a model with LoRA adapters reaches the engine only under lora.vllm_adapters")
        model.save_pretrained(folder, safe_serialization=True, state_dict=base_state_dict(model) if lora else None)
        return VLLMEngine(
            folder,
            eos_token_id=eos_token_id,
            max_slots=e.max_slots,
            max_seq_len=e.max_seq_len,
            policy_version=policy_version,
            dtype=e.dtype,
            fp32_head=cfg.optim.fp32_head,
            seed=seed,
            options=e.vllm,
            lora=cfg.lora if lora else None,
            adapters=adapter_state_dict(model) if lora else None,
        )
    raise ValueError(f"unknown engine.name {e.name!r}")


def build_torch_engine(cfg: Any, model: Any, eos_token_id: int, *, device: str, policy_version: int, seed: int,
                       max_slots: int | None = None) -> GenerationEngine:
    """The torch engine with the run's dtype, FP32 head and sequence length (training and validation);
    its slots are `max_slots` (default `engine.max_slots`) bounded by `engine.kv_cache_gib`
    (`scalerl.trainer.memory.kv.engine_slots`), so its KV cache never exceeds that budget (floor: one slot)."""
    from scalerl.trainer.engines.device import torch_dtype
    from scalerl.trainer.engines.torch_engine import TorchEngine
    from scalerl.trainer.memory.kv import engine_slots

    e = cfg.engine
    slots = engine_slots(model.config, e, max_slots)  # engine.kv_cache_gib bounds the preallocated cache
    return TorchEngine(model, eos_token_id=eos_token_id, device=device, dtype=torch_dtype(e.dtype),
                       max_slots=slots, max_seq_len=e.max_seq_len,
                       fp32_head=cfg.optim.fp32_head, seed=seed, policy_version=policy_version)
