"""GPU check of the trainer ranks: 2 ranks with NCCL and bf16 against 1 rank, then a short 2-rank run.

1. Equivalence: the same 4 batches through a 1-rank and a 2-rank `RankGroup` (FSDP2, NCCL, one GPU
   per rank, `precision=bf16` autocast over fp32 master weights); reports the largest parameter
   difference and the grad-norm spread across ranks. bf16 forward passes on different shard sizes
   round differently, so the bound here is loose (1e-3 after 4 AdamW steps at lr 1e-4); the exact
   check is the float64 CPU test (`tests/trainer/distributed/test_ranks_equivalence.py`).
2. Training: `scalerl train --trainer-ranks 2` of the CPU default's tiny model on the GPUs for 4 steps
   (validation, warm start and zero-variance filter off, so it needs no cache and every step trains):
   exit code, steps in metrics.jsonl, gather seconds, a sharded checkpoint.

Needs 2 CUDA devices (NCCL does not allow two ranks on one GPU); with fewer it reports `skipped`
with the reason. `--allow-cpu` runs the same checks with gloo on the CPU (smoke test of this script).

    .venv/bin/python benchmarks/gpu_check_ranks.py [--allow-cpu] [--out DIR]
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scalerl.trainer.core.recipe_config import LossConfig, OptimConfig
from scalerl.trainer.distributed.leader import RankGroup, architecture_args
from scalerl.trainer.distributed.ranks import RankSpec, free_port
from scalerl.trainer.run.log import read_metrics

from tests.support.models import tiny_llama
from tests.trainer.distributed.test_ranks_equivalence import BATCHES

BF16_TOL = 1e-3


def equivalence(device: str, backend: str) -> dict:
    optim = OptimConfig(lr=1e-4, warmup_steps=0, micro_batch_tokens=24,
                        precision="bf16" if device.startswith("cuda") else "fp32")
    start = tiny_llama(tied=False).to(device)
    spec = RankSpec(rank=0, world_size=1, init_method="tcp://127.0.0.1:0", backend=backend, device=device,
                    timeout_s=120, idle_timeout_s=300, builder="scalerl.trainer.distributed.leader:architecture",
                    builder_args=architecture_args(start), optim=optim,
                    loss=LossConfig())
    one = RankGroup.start(copy.deepcopy(start), spec)
    norms_one = [one.step(b)["grad_norm"] for b in BATCHES]
    ref = {k: v.detach().cpu() for k, v in one.gather_weights().items()}
    devices = [device, "cuda:1" if device.startswith("cuda") else device]
    spec2 = spec.model_copy(update={"world_size": 2, "init_method": f"tcp://127.0.0.1:{free_port()}"})
    two = RankGroup.start(copy.deepcopy(start), spec2, devices=devices)
    try:
        metrics = [two.step(b) for b in BATCHES]
        got = two.gather_weights()
        stats = dict(two.last_push)
    finally:
        two.close()
    diff = max(float((got[k].cpu() - ref[k]).abs().max()) for k in ref)
    return {"max_param_diff": diff, "tolerance": BF16_TOL, "ok": diff < BF16_TOL,
            "grad_norm_1_rank": norms_one, "grad_norm_2_ranks": [m["grad_norm"] for m in metrics],
            "grad_norm_spread": max(m["ranks/grad_norm_spread"] for m in metrics), "gather": stats}


def training_run(device: str, out: Path) -> dict:
    run = out / "ranks-run"
    cmd = [sys.executable, "-c", "from scalerl.trainer.cli import main; main()", "train", "--trainer-ranks", "2",
           "--max-steps", "4", "--out", str(run), f"engine.device={device}", "pipeline.max_time_s=null",
           "pipeline.prompts_per_step=8", "validation.enabled=false", "checkpoint.every_steps=2",
           # no warm-start cache needed; every step trains through the sharded update (random-model groups)
           "warm_start.enabled=false", "curriculum.zero_variance.mode=keep",
           "logging.progress=lines"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    steps = read_metrics(run / "metrics.jsonl", "step") if (run / "metrics.jsonl").exists() else []
    return {"exit_code": proc.returncode, "wall_s": round(time.perf_counter() - t0, 1), "steps": len(steps),
            "gather_s": [s.get("push/gather_s") for s in steps],
            "sharded_checkpoint": (run / "checkpoints" / "step_000004" / "sharded").is_dir(),
            "stderr_tail": proc.stderr[-1500:] if proc.returncode else ""}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--allow-cpu", action="store_true", help="gloo on the CPU (smoke test of the script)")
    ap.add_argument("--out", type=Path, default=None, help="folder for ranks_check.json and the run")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="gpu-check-ranks-"))
    out.mkdir(parents=True, exist_ok=True)
    gpus = torch.cuda.device_count()
    if args.allow_cpu:
        device, backend = "cpu", "gloo"
    elif gpus >= 2:
        device, backend = "cuda:0", "nccl"
    else:
        reason = f"{gpus} CUDA device(s): NCCL needs one GPU per rank, so 2 ranks need 2 GPUs"
        result = {"skipped": reason}
        print(json.dumps(result, indent=2))
        (out / "ranks_check.json").write_text(json.dumps(result, indent=2))
        return
    result = {"device": device, "backend": backend, "gpus": gpus,
              "equivalence": equivalence(device, backend), "training": training_run(device.split(":")[0], out)}
    (out / "ranks_check.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    if not (result["equivalence"]["ok"] and result["training"]["exit_code"] == 0):
        sys.exit(1)


if __name__ == "__main__":
    main()
