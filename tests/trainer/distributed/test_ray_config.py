"""The Ray/vLLM configuration surface: the multi-node example loads, CLI flags map to `ray.*`."""

from __future__ import annotations

from pathlib import Path

from scalerl.env.contracts.config_loader import load_config
from scalerl.trainer.config.resolve import RunFlags, resolve_config
from scalerl.trainer.config.train import TrainConfig

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "multinode.yaml"


def test_multinode_example_is_a_valid_train_config():
    cfg = load_config(TrainConfig, EXAMPLE, [])
    assert cfg.ray.enabled and cfg.ray.address == "auto" and cfg.engine.name == "vllm"
    assert cfg.ray.generator_num_gpus == 1 and cfg.ray.trainer_resources == {"trainer_node": 1}


def test_ray_address_flag_enables_ray_and_joins_that_cluster():
    cfg, _ = resolve_config(flags=RunFlags(ray_address="auto"))
    assert cfg.ray.enabled and cfg.ray.address == "auto"
    local, _ = resolve_config(flags=RunFlags(ray=True))
    assert local.ray.enabled and local.ray.address is None  # a local cluster is started
    assert not TrainConfig().ray.enabled  # default: everything in one process
