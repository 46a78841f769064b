"""`RayConfig`: where a run's actors go (config only; Ray is imported where it is used)."""

from __future__ import annotations

from pydantic import Field

from scalerl_env.records import Strict


class RayConfig(Strict):
    """Where the run's actors go. Off by default (everything in one process)."""

    enabled: bool = Field(
        default=False, description="run the trainer, generators, verifier, ledger as actors"
    )
    address: str | None = Field(
        default=None, description="'auto' or ray://host:port joins; None starts a local one"
    )
    namespace: str = "scalerl"
    local_num_cpus: int = Field(
        default=2, ge=1, description="CPUs of the local cluster started without address"
    )
    num_generators: int = Field(default=1, ge=1)
    generator_num_cpus: float = Field(default=1.0, ge=0)
    generator_num_gpus: float = Field(default=0.0, ge=0)
    generator_resources: dict[str, float] = Field(
        default_factory=dict, description="e.g. {generator_node: 1}"
    )
    trainer_num_cpus: float = Field(default=1.0, ge=0)
    trainer_num_gpus: float = Field(default=0.0, ge=0)
    trainer_resources: dict[str, float] = Field(default_factory=dict, description="e.g. {trainer_node: 1}")
    max_generator_restarts: int = Field(default=3, ge=0)
