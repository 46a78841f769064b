"""Launch a run on Ray: `TrainerActor` runs `scalerl.trainer.run.loop.train` unchanged on its node (rank 0;
`ray.trainer_num_gpus`), with the loop, the in-process runtime's feeder/scorer threads, checkpoints
and metrics there; generators, the verifier pool and the ledger owner become actors
(`scalerl.trainer.distributed.components`).

`scalerl train --ray` starts a local cluster (stopped at the end); `--ray-address auto` joins one.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from scalerl.trainer.distributed.components import init_ray


class TrainerActor:
    """Rank 0 of the trainer: runs the whole training loop on its node (see the module docstring)."""

    def train(self, cfg: Any, out: str, resume: bool) -> dict[str, Any]:
        from scalerl.trainer.run.loop import train

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        return train(cfg, Path(out), resume=resume)


def run_in_ray(cfg: Any, out: str | Path, *, resume: bool = False) -> dict[str, Any]:
    """Train with every component as a Ray actor; joins `ray.address` or starts (and stops) a local cluster."""
    import ray

    rc = cfg.ray
    started = init_ray(rc)
    actor = None
    try:
        actor = (
            ray.remote(TrainerActor)
            .options(
                num_cpus=rc.trainer_num_cpus,
                num_gpus=rc.trainer_num_gpus,
                resources=rc.trainer_resources or None,
                max_restarts=0,
            )
            .remote()
        )
        return ray.get(actor.train.remote(cfg, str(Path(out).resolve()), resume))
    finally:
        if actor is not None:
            ray.kill(actor)
        if started:
            ray.shutdown()
