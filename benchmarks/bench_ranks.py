"""Trainer ranks on CPU: update-step tokens/s with 1 and 2 ranks, and the full-weight gather time of a
~135 M-parameter model.

- Update step: the CPU default's tiny model (`scalerl.trainer.tiny.model`, fp32) and packed batches shaped like
  a CPU-default step (16 prompts x 8 samples, ~70 tokens each), through `RankGroup.step` (cut, shard,
  accumulate, clip, AdamW), the path `scalerl train --trainer-ranks N` takes. Three settings alive in
  one run, one step of each per round: 1 rank x 1 thread (the default), 1 rank x 2 threads (the same
  cores, no ranks), 2 ranks x 1 thread (gloo); the ratio is the median of per-round ratios. Start-up
  (process launch, rendezvous, weight broadcast) is excluded and reported.
- Gather: a Llama of SmolLM2-135M's shape built from code (random weights, no download), sharded over
  2 ranks; `RankGroup.gather_weights` (collective gather into rank 0's CPU memory, then the copy into
  rank 0's plain model), the step before every weight push.

On an idle 2-core machine, 2 ranks can at best double the 1-thread figure. On a shared machine two
processes also get two shares of the scheduler against other jobs, so the ratio can exceed 2; the
load average is printed beside the figures.

    .venv/bin/python benchmarks/bench_ranks.py                 # ~3-4 min on 2 idle cores
    .venv/bin/python benchmarks/bench_ranks.py --steps 3 --skip-gather
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import time
from pathlib import Path

import torch
from scalerl.trainer.core.recipe_config import LossConfig, OptimConfig
from scalerl.trainer.core.update import pack_samples
from scalerl.trainer.distributed.leader import RankGroup, architecture_args
from scalerl.trainer.distributed.ranks import RankSpec, free_port

OPTIM = OptimConfig(lr=1e-4, warmup_steps=0)  # the CPU default's micro-batch budget and layout


def synthetic_batch(n_samples: int, seed: int, vocab: int):
    """A CPU-default-like step: prompts 20-40 tokens, completions 20-60 tokens, groups of 8."""
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(4, vocab, (int(torch.randint(20, 41, (1,), generator=g)),), generator=g).tolist()
               for _ in range(n_samples)]
    completions = [torch.randint(4, vocab, (int(torch.randint(20, 61, (1,), generator=g)),), generator=g).tolist()
                   for _ in range(n_samples)]
    gen = [(-4.0 - torch.rand(len(c), generator=g)).tolist() for c in completions]
    adv = torch.randn(n_samples, generator=g).tolist()
    return pack_samples(prompts, completions, gen, [[1] * len(c) for c in completions], adv,
                        [i // 8 for i in range(n_samples)])


def rank_spec(model: torch.nn.Module, world: int, threads: int) -> RankSpec:
    return RankSpec(rank=0, world_size=world, init_method=f"tcp://127.0.0.1:{free_port()}", backend="gloo",
                    device="cpu", timeout_s=600, idle_timeout_s=600, torch_threads=threads,
                    builder="scalerl.trainer.distributed.leader:architecture",
                    builder_args=architecture_args(model), optim=OPTIM, loss=LossConfig())


SETTINGS = [(1, 1), (1, 2), (2, 1)]  # (ranks, threads per rank)


def bench_update(model, batches: list) -> list[dict]:
    """All settings alive at once, one step of each per round (machine noise hits them alike); the
    median of per-round ratios against 1 rank x 1 thread is reported with each setting's median."""
    groups, start_s = [], []
    for world, threads in SETTINGS:
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        groups.append(RankGroup.start(copy.deepcopy(model), rank_spec(model, world, threads)))
        start_s.append(time.perf_counter() - t0)
    times: list[list[float]] = [[] for _ in SETTINGS]
    try:
        for i, b in enumerate(batches):
            for k, ((_, threads), group) in enumerate(zip(SETTINGS, groups)):
                torch.set_num_threads(threads)
                t = time.perf_counter()
                group.step(b)
                if i > 0:  # the first round warms up
                    times[k].append(time.perf_counter() - t)
    finally:
        for g in groups:
            g.close()
    tokens = statistics.mean(b.num_tokens for b in batches[1:])
    out = []
    for k, (world, threads) in enumerate(SETTINGS):
        med = statistics.median(times[k])
        ratio = statistics.median(t0 / t for t0, t in zip(times[0], times[k]))
        out.append({"ranks": world, "threads_per_rank": threads, "start_s": round(start_s[k], 2),
                    "step_s_median": round(med, 3), "tokens_per_step": round(tokens),
                    "tokens_per_s": round(tokens / med), "vs_1_rank_1_thread": round(ratio, 2)})
    return out


def smollm2_135m_shape():
    """A Llama with SmolLM2-135M's shape (vocab 49152, hidden 576, 30 layers, tied), random weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                      num_attention_heads=9, num_key_value_heads=3, head_dim=64, max_position_embeddings=2048,
                      tie_word_embeddings=True)
    return LlamaForCausalLM(cfg).float()


def bench_gather(repeats: int) -> dict:
    torch.set_num_threads(1)
    model = smollm2_135m_shape()
    n_params = sum(p.numel() for p in model.parameters())
    t0 = time.perf_counter()
    group = RankGroup.start(model, rank_spec(model, 2, 1))
    start_s = time.perf_counter() - t0
    try:
        raw, total = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            weights = group.gather_weights()
            total.append(time.perf_counter() - t)
            raw.append(group.last_push["push/gather_s"])
        stats = dict(group.last_push)
    finally:
        group.close()
    return {"params": n_params, "ranks": 2, "start_s": round(start_s, 1), "keys": len(weights),
            "gather_s_median": round(statistics.median(raw), 2), "gather_and_copy_s_median": round(
                statistics.median(total), 2), "gathered_mb": round(stats["push/gather_bytes"] / 1e6),
            "rank0_peak_rss_mb": round(stats["push/peak_rss_bytes"] / 1e6)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=6, help="timed update steps per setting (after 1 warm-up)")
    ap.add_argument("--samples", type=int, default=128, help="samples per step (CPU default: 16 x 8)")
    ap.add_argument("--gather-repeats", type=int, default=3)
    ap.add_argument("--skip-gather", action="store_true")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "ranks.json")
    args = ap.parse_args()
    from scalerl.trainer.tiny.model import CharTokenizer, build_tiny_model

    model = build_tiny_model()
    vocab = CharTokenizer().vocab_size
    batches = [synthetic_batch(args.samples, seed, vocab) for seed in range(args.steps + 1)]
    load_before = os.getloadavg()
    update = bench_update(model, batches)
    result = {"update_step": update, "load_avg_before": [round(x, 2) for x in load_before]}
    if not args.skip_gather:
        result["gather_135m"] = bench_gather(args.gather_repeats)
    result["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    result["cpus"] = os.cpu_count()
    result["when"] = time.strftime("%Y-%m-%d %H:%M")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
