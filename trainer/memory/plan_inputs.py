"""`PlanInputs`: what the memory plan reads from a run's configuration (config only, no torch).

Built by `TrainConfig.plan_inputs()`; `scalerl.trainer.memory.plan` and `.preflight` read nothing else,
so a plan's signature says which sections can change it: the model (its config.json gives the shape),
the engine, the update step's optimizer settings, the trainer ranks, Ray's placement, LoRA and whether
validation builds its own engine.
"""

from __future__ import annotations

from pydantic import Field
from scalerl.env.contracts.records import Strict
from scalerl.trainer.core.lora_config import LoraConfig
from scalerl.trainer.core.recipe_config import OptimConfig
from scalerl.trainer.distributed.placement_config import RayConfig, TrainerRanksConfig
from scalerl.trainer.engines.engine_config import EngineConfig


class PlanInputs(Strict):
    """The sections of `TrainConfig` the memory plan reads (same names), and `validation.enabled`."""

    model: str | None
    engine: EngineConfig
    optim: OptimConfig
    trainer_ranks: TrainerRanksConfig
    ray: RayConfig
    lora: LoraConfig
    validation_enabled: bool = Field(description="validation.enabled: a torch validation engine is planned")
