"""PipelineRL-k vs synchronous vs PPO-off-policy-k: the CPU default, and a simulated GPU cluster.

Part 1 (real): the built-in CPU default (warm-started tiny model, real verifiers and sandbox) for a
fixed number of steps with PipelineRL-8, k = 0 (synchronous) and PPO-off-policy-8, one after the
other in this process. Reports samples/s (steps x prompts x samples / training wall time, validation
excluded), the generator idle fraction, and each mode's ratio against k = 0. Target: PipelineRL-8
>= 1.3x synchronous.

Part 2 (simulation, `scalerl.trainer.rollout.simulation`): a generator cluster and a trainer with long-tailed
generation lengths, under the same rule functions as the runtime, for k in 0..16 and PPO-off-policy-8.
Reports generator and trainer utilization; target: generator utilization >= 95 % at k = 8. Writes
`docs/figures/pipeline_utilization.png` and the JSON of both parts to `benchmarks/results/`.

    .venv/bin/python benchmarks/bench_pipeline.py                 # 40 steps per mode
    .venv/bin/python benchmarks/bench_pipeline.py --steps 20 --sim-only
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

from scalerl.env.contracts.config_loader import load_config
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.rollout.simulation import SimConfig, simulate
from scalerl.trainer.run.log import read_metrics

TARGET_RATIO = 1.3
TARGET_GEN_UTIL = 0.95
ROOT = Path(__file__).resolve().parent.parent
MODES = (("pipeline-8", ["pipeline.mode=pipeline", "pipeline.k=8"]),
         ("sync (k=0)", ["pipeline.mode=pipeline", "pipeline.k=0"]),
         ("ppo-offpolicy-8", ["pipeline.mode=ppo-offpolicy", "pipeline.k=8"]))


def run_mode(overrides: list[str], steps: int, workdir: Path) -> dict:
    from scalerl.trainer.run.loop import train

    cfg = load_config(TrainConfig, None, [*overrides, f"pipeline.max_steps={steps}", "validation.enabled=false",
                                          "checkpoint.every_steps=100000", "logging.progress=lines"])
    out = Path(tempfile.mkdtemp(dir=workdir))
    summary = train(cfg, out)
    steps_rec = read_metrics(out / "metrics.jsonl", "step")
    wall = steps_rec[-1]["elapsed_s"]
    samples = steps * cfg.pipeline.prompts_per_step * cfg.pipeline.samples_per_prompt
    return {"steps": steps, "wall_s": wall, "samples_per_s": samples / wall,
            "generator_idle_fraction": summary["generator_idle_fraction"],
            "max_lag": max((r["lag/max"] or 0) for r in steps_rec)}


def real_part(steps: int) -> dict:
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, overrides in MODES:
            t0 = time.perf_counter()
            results[name] = run_mode(overrides, steps, Path(tmp))
            print(f"{name:<16} {results[name]['samples_per_s']:7.1f} samples/s  idle "
                  f"{results[name]['generator_idle_fraction']:.2f}  max lag {results[name]['max_lag']}  "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    base = results["sync (k=0)"]["samples_per_s"]
    for r in results.values():
        r["ratio_vs_sync"] = r["samples_per_s"] / base
    return results


def sim_part() -> dict:
    rows = {}
    for mode, k in [("pipeline", k) for k in (0, 1, 2, 4, 8, 16)] + [("ppo-offpolicy", 8)]:
        r = simulate(SimConfig(mode=mode, k=k, steps=60))
        rows[f"{mode}-{k}"] = {"k": k, "mode": mode, "generator_utilization": r.generator_utilization,
                               "trainer_utilization": r.trainer_utilization, "samples_per_s": r.samples_per_s,
                               "max_lag": r.max_lag}
        print(f"sim {mode:<14} k={k:<3} generator {r.generator_utilization:6.1%}  trainer "
              f"{r.trainer_utilization:6.1%}  samples/s {r.samples_per_s:6.2f}  max lag {r.max_lag}", flush=True)
    return rows


def plot(sim: dict, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    pipe = [r for r in sim.values() if r["mode"] == "pipeline"]
    fig = Figure(figsize=(6.5, 4.0), dpi=120, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ks = [r["k"] for r in pipe]
    ax.plot(ks, [r["generator_utilization"] for r in pipe], marker="o", label="generators (PipelineRL-k)")
    ax.plot(ks, [r["trainer_utilization"] for r in pipe], marker="s", label="trainer (PipelineRL-k)")
    off = sim.get("ppo-offpolicy-8")
    if off:
        ax.scatter([8], [off["generator_utilization"]], marker="x", color="k", label="generators (PPO-off-policy-8)")
    ax.set_xlabel("k (max policy lag, steps)")
    ax.set_ylabel("utilization")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--sim-only", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    out: dict = {"sim": sim_part()}
    plot(out["sim"], ROOT / "docs" / "figures" / "pipeline_utilization.png")
    gen8 = out["sim"]["pipeline-8"]["generator_utilization"]
    print(f"simulation: generator utilization at k=8 {gen8:.1%} (target >= {TARGET_GEN_UTIL:.0%})")
    if not args.sim_only:
        out["cpu_default"] = real_part(args.steps)
        ratio = out["cpu_default"]["pipeline-8"]["ratio_vs_sync"]
        print(f"CPU default: PipelineRL-8 / sync = {ratio:.2f}x (target >= {TARGET_RATIO}x); "
              f"ppo-offpolicy-8 / sync = {out['cpu_default']['ppo-offpolicy-8']['ratio_vs_sync']:.2f}x")
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / "pipeline.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
