"""Build the generation engine that `engine.name` names, from an in-memory Hugging Face model.

- `torch`: `TorchEngine` on the model itself (weights copied), on `engine.device`.
- `vllm`: the model is written as a Hugging Face folder (`save_pretrained`, safetensors) under
  `work_dir` and served by `VLLMEngine` (needs vLLM installed: `make vllm-env`). The folder is what
  the vLLM worker loads; later weights arrive in flight (`update_weights`), not through the folder.
  A model that holds LoRA adapters (`scalerl.trainer.core.lora`, given only when `EngineSpec.pushes_adapters`)
  is written as its base weights and vLLM serves its adapters through its own LoRA loading
  (`scalerl.trainer.engines.vllm_lora`); the pushes then carry adapters.

Guarantee: both engines get the same sampling settings (dtype, FP32 head, slots, sequence length, seed)
and the same KV-cache budget (`engine.kv_cache_gib`), from one `EngineSpec`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scalerl.trainer.engines.base import GenerationEngine
from scalerl.trainer.engines.engine_config import EngineConfig, EngineSpec


def build_engine(spec: EngineSpec, model: Any, eos_token_id: int, *, device: str, policy_version: int, seed: int,
                 work_dir: str | Path) -> GenerationEngine:
    """The engine `spec.engine.name` names; `work_dir` holds the vLLM model folder (unused by the torch engine)."""
    e = spec.engine
    if e.name == "torch":
        return build_torch_engine(e, model, eos_token_id, fp32_head=spec.fp32_head, device=device,
                                  policy_version=policy_version, seed=seed)
    if e.name == "vllm":
        from scalerl.trainer.core.lora import adapter_state_dict, base_state_dict, has_lora
        from scalerl.trainer.engines.vllm_engine import VLLMEngine

        folder = Path(work_dir) / "generator_model"
        lora = has_lora(model)
        if lora and not spec.pushes_adapters:
            raise ValueError("a model with LoRA adapters reaches the engine only under lora.vllm_adapters")
        model.save_pretrained(folder, safe_serialization=True, state_dict=base_state_dict(model) if lora else None)
        return VLLMEngine(folder, eos_token_id=eos_token_id, policy_version=policy_version, seed=seed,
                          lora=spec.lora if lora else None, adapters=adapter_state_dict(model) if lora else None,
                          **vllm_settings(spec))
    raise ValueError(f"unknown engine.name {e.name!r}")


def vllm_settings(spec: EngineSpec) -> dict[str, Any]:
    """`VLLMEngine`'s keywords from the run's configuration: the settings the torch engine gets too (slots,
    sequence length, dtype, FP32 head, KV-cache budget) and the vLLM-only options."""
    e = spec.engine
    return {"max_slots": e.max_slots, "max_seq_len": e.max_seq_len, "dtype": e.dtype, "fp32_head": spec.fp32_head,
            "kv_cache_gib": e.kv_cache_gib, "options": e.vllm}


def build_torch_engine(engine: EngineConfig, model: Any, eos_token_id: int, *, fp32_head: bool, device: str,
                       policy_version: int, seed: int, max_slots: int | None = None) -> GenerationEngine:
    """The torch engine with the run's dtype, FP32 head and sequence length (training and validation);
    its slots are `max_slots` (default `engine.max_slots`) bounded by `engine.kv_cache_gib`
    (`scalerl.trainer.memory.kv.engine_slots`), so its KV cache never exceeds that budget (floor: one slot)."""
    from scalerl.trainer.engines.device import torch_dtype
    from scalerl.trainer.engines.torch_engine import TorchEngine
    from scalerl.trainer.memory.kv import engine_slots

    slots = engine_slots(model.config, engine, max_slots)  # engine.kv_cache_gib bounds the preallocated cache
    return TorchEngine(model, eos_token_id=eos_token_id, device=device, dtype=torch_dtype(engine.dtype),
                       max_slots=slots, max_seq_len=engine.max_seq_len,
                       fp32_head=fp32_head, seed=seed, policy_version=policy_version)
