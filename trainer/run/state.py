"""The run object: everything one training run holds, typed, passed to every phase of the loop.

`Run` is built (with keywords only) by `scalerl.trainer.run.setup.setup_run` and read by the loop
(`scalerl.trainer.run.loop`) and its zero-variance phases (`scalerl.trainer.run.zero_variance`); `RunState`
is what the loop carries from step to step. This module holds data only: it builds nothing and imports
no phase.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalerl.curriculum.sampler import Sampler
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.core.update import PolicyTrainer
from scalerl.trainer.distributed.leader import RankGroup
from scalerl.trainer.rollout.problems import DomainPool, PromptCodec
from scalerl.trainer.rollout.runtime import Runtime
from scalerl.trainer.rollout.sample_log import RolloutLog
from scalerl.trainer.rollout.worker import Rollouts
from scalerl.trainer.run.compute import ComputeClock
from scalerl.trainer.run.log import RunLog

log = logging.getLogger(__name__)


@dataclass
class RunState:
    """What the loop carries from step to step besides the model, optimizer and ledger."""

    elapsed_s: float = 0.0  # RL wall time so far (restored on resume)
    retired_count: int = 0
    last_push_s: float | None = None  # duration of the last weight push
    last_tokens: int = 0  # generator's sampled tokens at the last log line ...
    last_tokens_at: float | None = None  # ... and when (perf_counter), for tokens/s


@dataclass(kw_only=True)
class Run:
    cfg: TrainConfig
    out: Path
    model: Any  # the plain policy the engine, validation and the checkpoints' HF files read (rank 0's mirror)
    codec: PromptCodec
    ranks: RankGroup  # the trainer ranks; this process is rank 0 (scalerl.trainer.distributed.leader)
    runtime: Runtime
    rollouts: Rollouts
    ledger: Any  # scalerl.curriculum.ledger.store.Ledger, or its Ray actor proxy
    sampler: Sampler
    verifier: Any
    pools: dict[str, DomainPool]
    log: RunLog
    clock: ComputeClock
    device: str
    state: RunState = field(default_factory=RunState)
    samples: RolloutLog | None = None  # rollouts.jsonl and the format watch (scalerl.trainer.rollout.sample_log)

    @property
    def trainer(self) -> PolicyTrainer:
        """Rank 0's trainer: optimizer, step count, policy version."""
        return self.ranks.trainer

    @property
    def step(self) -> int:
        return self.trainer.step_count

    def close(self) -> None:
        closers = (self.runtime.close, self.ranks.close, self.log.close, self.ledger.close,
                   getattr(self.verifier, "close", None))
        for closer in closers:
            if closer is not None:
                try:
                    closer()
                except Exception:  # keep closing the rest
                    log.exception("error while closing the run")
