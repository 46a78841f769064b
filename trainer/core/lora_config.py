"""The `lora` section of `TrainConfig`: low-rank adapters on the policy's linear layers (config only, no torch).

Off by default (the ScaleRL recipe trains every parameter). With `enabled`, `trainer.core.lora` injects
PEFT LoRA adapters into the modules named by `target_modules` (matched by name suffix, as PEFT does),
freezes everything else and the update trains the adapters only.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from scalerl_env.contracts.records import Strict

ALL_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
NOT_TARGETS = {"lm_head", "embed_tokens"}  # the FP32 head reads lm_head.weight directly: no adapter there


class LoraConfig(Strict):
    enabled: bool = Field(default=False, description="train low-rank adapters only (PEFT LoRA); off = every weight")
    rank: int = Field(default=16, ge=1, description="adapter rank r")
    alpha: float = Field(default=32.0, gt=0, description="scale alpha (the update is alpha / r x B A)")
    dropout: float = Field(default=0.0, ge=0, lt=1, description="dropout on the adapter's input")
    target_modules: list[str] = Field(
        default_factory=lambda: list(ALL_PROJECTIONS), min_length=1,
        description="linear layers that get adapters (name suffixes); default: every attention and MLP projection")

    @field_validator("target_modules")
    @classmethod
    def _not_head_or_embedding(cls, names: list[str]) -> list[str]:
        bad = sorted(NOT_TARGETS & {n.rpartition(".")[2] for n in names})
        if bad:
            raise ValueError(f"lora.target_modules may not name {bad}: the FP32 head and the engines read those "
                             "weights directly")
        return names
