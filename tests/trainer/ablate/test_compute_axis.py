"""The compute axis of the budget and the fits: wall seconds x devices in use, not busy seconds.

The run test trains synchronously (`pipeline.k=0`): the generator waits while the trainer steps, so
busy time under-counts what the run held. Its compute must be the sum of the steps' wall times x the
devices in use, and larger than the busy seconds logged next to it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scalerl_env.contracts.config import load_config
from trainer.config.train import TrainConfig
from trainer.run.log import ComputeClock, devices_in_use, read_metrics


def test_clock_keeps_busy_and_wall_device_seconds_apart() -> None:
    clock = ComputeClock(n_params=10)
    clock.add_training(1.5, tokens=100)
    clock.add_generation(busy_s_total=2.0, tokens_total=50)
    clock.add_wall(4.0, devices=3)
    assert clock.busy_s == pytest.approx(3.5)
    assert clock.device_s == pytest.approx(12.0)
    restored = ComputeClock(10, **{k: v for k, v in clock.state().items() if k != "flops"})
    assert (restored.device_s, restored.busy_s) == (clock.device_s, clock.busy_s)


def test_devices_in_use() -> None:
    assert devices_in_use(TrainConfig()) == 1  # one process: engine and trainer share the device
    gpus = load_config(TrainConfig, None, ["ray.enabled=true", "ray.num_generators=2", "ray.generator_num_gpus=1",
                                           "ray.trainer_num_gpus=1"])
    assert devices_in_use(gpus) == 3
    cpus = load_config(TrainConfig, None, ["ray.enabled=true", "ray.num_generators=3"])
    assert devices_in_use(cpus) == 4  # CPU actors: each generator and the trainer is one device


@pytest.mark.timeout(2400)  # may pay the CPU default's warm start on a cold machine
def test_idle_generator_accrues_wall_times_devices(tmp_path: Path) -> None:
    from trainer.run.loop import train

    cfg = load_config(TrainConfig, None, [
        "pipeline.k=0", "pipeline.max_steps=6", "pipeline.max_time_s=null", "pipeline.prompts_per_step=4",
        "pipeline.samples_per_prompt=4", "validation.enabled=false", "checkpoint.every_steps=1000"])
    train(cfg, tmp_path / "run")
    steps = read_metrics(tmp_path / "run" / "metrics.jsonl", "step")
    assert len(steps) == 6
    wall = sum(s["step_time_s"] for s in steps) * devices_in_use(cfg)
    assert steps[-1]["compute_device_s"] == pytest.approx(wall, rel=1e-6)
    assert max(s["generator/idle_fraction"] for s in steps) > 0
    assert steps[-1]["compute_device_s"] > steps[-1]["compute_busy_s"]
