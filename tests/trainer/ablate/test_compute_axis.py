"""The compute axes of the budget and the fits: wall seconds x devices in use (not busy seconds), and
samples, tokens and FLOPs, which stop runs at equal compute whatever the machine's load.

The run test trains synchronously (`pipeline.k=0`): the generator waits while the trainer steps, so
busy time under-counts what the run held. Its compute must be the sum of the steps' wall times x the
devices in use, and larger than the busy seconds logged next to it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scalerl.env.contracts.config_loader import load_config
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.run.compute import ComputeClock, FlopModel
from scalerl.trainer.run.log import devices_in_use, read_metrics


def test_clock_keeps_every_axis_apart() -> None:
    clock = ComputeClock(FlopModel(matmul_params=10, layers=2, attention_dim=4))
    clock.add_taken([(2, 1), (2, 3)])  # two samples of a 2-token prompt
    clock.add_training(1.5, [(2, 1)])
    clock.add_generation_busy(2.0)
    clock.add_generation_busy(2.5)  # cumulative engine counter: only the new 0.5 s
    clock.add_wall(4.0, devices=3)
    assert clock.busy_s == pytest.approx(4.0) and clock.device_s == pytest.approx(12.0)
    assert (clock.samples, clock.tokens) == (2, 4)
    # by hand: forward(T) = 2*10*T + 4*2*4*T(T+1)/2; T=3: 60 + 192 = 252, T=5: 100 + 480 = 580
    assert clock.gen_flops == 252 + 580 and clock.train_flops == 3 * 252
    assert clock.spent("flops") == clock.flops == 4 * 252 + 580
    restored = ComputeClock(clock.flop_model, **clock.state())
    assert restored.state() == clock.state()
    old = ComputeClock(clock.flop_model, device_s=5.0, flops=7.0, busy_s=1.0)  # a checkpoint's older counters
    assert (old.device_s, old.flops, old.samples) == (5.0, 7.0, 0.0)


def test_flop_model_matches_torch_flop_counter_on_the_tiny_model() -> None:
    """`FlopModel.of` reads N and the attention shape off the model; torch's FlopCounterMode counts the
    matmuls of a real forward: with eager attention (its QKᵀ and AV are plain matmuls, counted as full
    T x T products, so compared non-causal; the counter does not see the CPU SDPA kernel)."""
    import torch
    from scalerl.trainer.tiny.model import CharTokenizer, build_tiny_model
    from torch.utils.flop_counter import FlopCounterMode

    model = build_tiny_model(TrainConfig().tiny, CharTokenizer()).eval()
    model.set_attn_implementation("eager")
    flops = FlopModel.of(model)
    embedding = model.get_input_embeddings().weight.numel()
    assert 0 < flops.matmul_params < sum(p.numel() for p in model.parameters()) - embedding + 1
    tokens = 37
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.randint(0, 50, (1, tokens)))
    assert counter.get_total_flops() == pytest.approx(flops.forward(tokens, causal=False), rel=1e-6)


@pytest.mark.timeout(2400)
def test_a_samples_budget_stops_runs_at_equal_samples_whatever_the_threads(tmp_path: Path) -> None:
    """Two seeds at different thread counts (the wall time per step differs), one samples budget: the
    runs' samples differ by less than one step's worth (16 here)."""
    from scalerl.trainer.run.loop import train

    finals = []
    for seed, threads in ((0, 1), (1, 2)):
        cfg = load_config(TrainConfig, None, [
            "pipeline.k=1", "pipeline.max_time_s=null", "pipeline.prompts_per_step=4", "pipeline.samples_per_prompt=4",
            "pipeline.budget=40", "pipeline.budget_axis=samples", f"pipeline.seed={seed}",
            f"pipeline.torch_threads={threads}", "validation.enabled=false", "checkpoint.every_steps=1000"])
        train(cfg, tmp_path / f"run{seed}")
        steps = read_metrics(tmp_path / f"run{seed}" / "metrics.jsonl", "step")
        last = steps[-1]
        assert last["compute_samples"] >= 40 and steps[-2]["compute_samples"] < 40  # stopped at the first step past it
        assert last["compute_flops"] == pytest.approx(last["compute_gen_flops"] + last["compute_train_flops"])
        assert last["compute_tokens"] > 0 and last["compute_train_flops"] > 0
        finals.append(last["compute_samples"])
    assert abs(finals[0] - finals[1]) < 16


def test_devices_in_use() -> None:
    assert devices_in_use(TrainConfig()) == 1  # one process: engine and trainer share the device
    gpus = load_config(TrainConfig, None, ["ray.enabled=true", "ray.num_generators=2", "ray.generator_num_gpus=1",
                                           "ray.trainer_num_gpus=1"])
    assert devices_in_use(gpus) == 3
    cpus = load_config(TrainConfig, None, ["ray.enabled=true", "ray.num_generators=3"])
    assert devices_in_use(cpus) == 4  # CPU actors: each generator and the trainer is one device


@pytest.mark.timeout(2400)  # may pay the CPU default's warm start on a cold machine
def test_idle_generator_accrues_wall_times_devices(tmp_path: Path) -> None:
    from scalerl.trainer.run.loop import train

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
