"""The Ray/vLLM configuration surface: the multi-node example loads, CLI flags map to `ray.*`."""

from __future__ import annotations

from pathlib import Path

from scalerl.env.contracts.config import load_config
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.run.resolve_config import build_config

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "multinode.yaml"


def test_multinode_example_is_a_valid_train_config():
    cfg = load_config(TrainConfig, EXAMPLE, [])
    assert cfg.ray.enabled and cfg.ray.address == "auto" and cfg.engine.name == "vllm"
    assert cfg.ray.generator_num_gpus == 1 and cfg.ray.trainer_resources == {"trainer_node": 1}


def test_ray_address_flag_enables_ray_and_joins_that_cluster():
    cfg = build_config(
        None, [], domains=None, model=None, engine=None, max_steps=None, resume=None, ray_address="auto"
    )
    assert cfg.ray.enabled and cfg.ray.address == "auto"
    local = build_config(
        None, [], domains=None, model=None, engine=None, max_steps=None, resume=None, ray=True
    )
    assert local.ray.enabled and local.ray.address is None  # a local cluster is started
    assert not TrainConfig().ray.enabled  # default: everything in one process
