"""Launch a run on Ray: `TrainerActor` runs the training loop (`job`, e.g. `scalerl.trainer.run.loop.train`
bound to its configuration and run folder) unchanged on its node (rank 0; `ray.trainer_num_gpus`), with
the loop, the in-process runtime's feeder/scorer threads, checkpoints and metrics there; generators, the
verifier pool and the ledger owner become actors (`scalerl.trainer.distributed.components`).

`scalerl train --ray` starts a local cluster (stopped at the end); `--ray-address auto` joins one. The
job is a picklable callable (a module-level function, or a `functools.partial` of one), so this module
imports nothing of the loop it launches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from scalerl.trainer.distributed.components import init_ray
from scalerl.trainer.distributed.placement_config import RayConfig

Job = Callable[[], dict[str, Any]]


class TrainerActor:
    """Rank 0 of the trainer: runs the whole training loop on its node (see the module docstring)."""

    def run(self, job: Job) -> dict[str, Any]:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        return job()


def run_in_ray(rc: RayConfig, job: Job) -> dict[str, Any]:
    """`job()` inside a trainer actor, every component a Ray actor; joins `rc.address` or starts (and stops)
    a local cluster. Returns what `job` returns (the run's summary)."""
    import ray

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
        return ray.get(actor.run.remote(job))
    finally:
        if actor is not None:
            ray.kill(actor)
        if started:
            ray.shutdown()
