"""`RayConfig`: where a run's actors go; `TrainerRanksConfig`: how many trainer ranks, on which devices
(config only; Ray and torch.distributed are imported where they are used)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator
from scalerl.env.contracts.records import Strict


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


class TrainerRanksConfig(Strict):
    """Data-parallel trainer ranks (FSDP2 on torch.distributed; `scalerl.trainer.distributed.leader`). One rank
    is the single trainer process; N ranks split every batch and shard the policy and AdamW state."""

    count: int = Field(default=1, ge=1, description="trainer ranks (`--trainer-ranks`); 1 = one process")
    devices: list[str] = Field(
        default_factory=list, description="device of each rank, e.g. [cuda:0, cuda:1]; empty = engine.device "
        "for rank 0 and cuda:<rank> (or cpu) for the others")
    backend: Literal["auto", "gloo", "nccl"] = Field(default="auto", description="auto: NCCL on CUDA, else gloo")
    timeout_s: float = Field(
        default=600.0, gt=0, description="a collective that not every rank joins fails after this")
    idle_timeout_s: float = Field(
        default=3600.0, gt=0, description="how long ranks > 0 wait for rank 0's next command "
        "(rank 0 generates, validates and checkpoints meanwhile)")
    master_addr: str | None = Field(default=None, description="rendezvous host; None = 127.0.0.1, or rank 0's "
                                    "node IP under Ray")
    master_port: int = Field(default=0, ge=0, le=65535, description="rendezvous port; 0 = a free one")

    @model_validator(mode="after")
    def _devices_per_rank(self) -> TrainerRanksConfig:
        if self.devices and len(self.devices) != self.count:
            raise ValueError(f"trainer_ranks.devices names {len(self.devices)} devices for {self.count} ranks")
        return self
