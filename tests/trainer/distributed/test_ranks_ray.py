"""Trainer rank 1 as a Ray actor in a placement group (`RayRanks`), rank 0 in this process choosing the
rendezvous address: the same steps give the one-rank parameters. `slow`: a local Ray cluster and an
actor start cost ~1 min here."""

from __future__ import annotations

import copy
from functools import partial

import pytest
from scalerl.trainer.distributed.launch_ranks import RayRanks, node_address
from scalerl.trainer.distributed.leader import RankGroup, architecture_args
from scalerl.trainer.distributed.ranks import RankSpec, free_port

from tests.support.models import tiny_llama
from tests.trainer.distributed.test_ranks_equivalence import BATCHES, LOSS, OPTIM, PARAM_TOL

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(900)]


def test_ray_actor_rank_gives_the_one_rank_parameters():
    import ray

    ray.init(num_cpus=2, include_dashboard=False)
    try:
        start = tiny_llama(tied=True).double()
        addr = node_address(use_ray=True)
        spec = RankSpec(rank=0, world_size=2, init_method=f"tcp://{addr}:{free_port(addr)}", backend="gloo",
                        device="cpu", timeout_s=60, idle_timeout_s=120,
                        builder="scalerl.trainer.distributed.leader:architecture",
                         builder_args=architecture_args(start),
                        optim=OPTIM, loss=LOSS)
        ref = RankGroup.single(copy.deepcopy(start), OPTIM, LOSS)
        group = RankGroup.start(copy.deepcopy(start), spec, launch=partial(RayRanks, num_cpus=1, num_gpus=0))
        try:
            for b in BATCHES:
                assert group.step(b)["grad_norm"] == pytest.approx(ref.step(b)["grad_norm"], rel=1e-10)
            pushed = group.gather_weights()
        finally:
            group.close()
        assert max(float((pushed[k] - v).abs().max()) for k, v in ref.mirror.state_dict().items()) < PARAM_TOL
    finally:
        ray.shutdown()
