"""The `lora` section of `TrainConfig`: low-rank adapters on the policy's linear layers (config only, no torch).

Off by default (the ScaleRL recipe trains every parameter). With `enabled`, `scalerl.trainer.core.lora` injects
PEFT LoRA adapters into the modules named by `target_modules` (matched by name suffix, as PEFT does),
freezes everything else and the update trains the adapters only.

`pushes_adapters(lora, engine_name)` is the one rule for what the weight push sends: with `engine.name=vllm` and
`lora.vllm_adapters` (the default) vLLM is started with its own LoRA loading and each push sends the
adapters; otherwise (the torch engine, or `vllm_adapters=false`) the push sends merged weights.
`vllm_lora_rank` / `vllm_target_modules` translate the section into vLLM's terms, refusing what
vLLM cannot serve.
"""

from __future__ import annotations

from pydantic import Field, field_validator
from scalerl.env.contracts.records import Strict

ALL_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
NOT_TARGETS = {"lm_head", "embed_tokens"}  # the FP32 head reads lm_head.weight directly: no adapter there
VLLM_MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vLLM 0.32's LoRAConfig.max_lora_rank literals
VLLM_PACKED = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj", "gate_proj": "gate_up_proj",
               "up_proj": "gate_up_proj", "o_proj": "o_proj", "down_proj": "down_proj"}  # HF name -> vLLM layer


class LoraConfig(Strict):
    enabled: bool = Field(default=False, description="train low-rank adapters only (PEFT LoRA); off = every weight")
    rank: int = Field(default=16, ge=1, description="adapter rank r")
    alpha: float = Field(default=32.0, gt=0, description="scale alpha (the update is alpha / r x B A)")
    dropout: float = Field(default=0.0, ge=0, lt=1, description="dropout on the adapter's input")
    target_modules: list[str] = Field(
        default_factory=lambda: list(ALL_PROJECTIONS), min_length=1,
        description="linear layers that get adapters (name suffixes); default: every attention and MLP projection")
    vllm_adapters: bool = Field(
        default=True, description="engine.name=vllm: push the adapters to vLLM's own LoRA loading (one adapter "
        "replaced in place at each push); false = push merged weights as to the torch engine")

    @field_validator("target_modules")
    @classmethod
    def _not_head_or_embedding(cls, names: list[str]) -> list[str]:
        bad = sorted(NOT_TARGETS & {n.rpartition(".")[2] for n in names})
        if bad:
            raise ValueError(f"lora.target_modules may not name {bad}: the FP32 head and the engines read those "
                             "weights directly")
        return names


def pushes_adapters(lora: LoraConfig, engine_name: str) -> bool:
    """Whether the weight push sends adapters (vLLM's LoRA) instead of merged weights, for the `lora` section
    and `engine.name`."""
    return bool(lora.enabled and lora.vllm_adapters and engine_name == "vllm")


def vllm_lora_rank(lora: LoraConfig) -> int:
    """vLLM's `max_lora_rank` for `lora.rank`: the smallest value vLLM accepts that holds it."""
    for r in VLLM_MAX_LORA_RANKS:
        if r >= lora.rank:
            return r
    raise ValueError(f"lora.rank {lora.rank}: vLLM serves adapters up to rank {VLLM_MAX_LORA_RANKS[-1]} "
                     "(use lora.vllm_adapters=false to push merged weights)")


def vllm_target_modules(lora: LoraConfig) -> list[str]:
    """vLLM's `lora_target_modules` (its packed layers) for `lora.target_modules`; names vLLM has no LoRA
    layer for are refused."""
    leaves = [t.rpartition(".")[2] for t in lora.target_modules]
    bad = sorted({n for n in leaves if n not in VLLM_PACKED})
    if bad:
        raise ValueError(f"lora.target_modules {bad}: vLLM's LoRA loading serves {sorted(VLLM_PACKED)} "
                         "(use lora.vllm_adapters=false to push merged weights)")
    return sorted({VLLM_PACKED[n] for n in leaves})
