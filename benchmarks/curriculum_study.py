"""Inputs of the `scalerl train` curriculum study (docs/curriculum.md, "Study: a mixed-difficulty pool").

`data`: writes the training pool (generated math of levels 0-3 in one parquet file, so the sampler draws
it uniformly) and the fixed held-out file every run validates on.
`warm-start`: puts the CPU default's shipped warm start (trained on the default level-0 pool, see
`trainer.tiny.warm_start`) in the user cache under the key of the run's own pool, so every run of the
study starts from that one policy instead of a warm start trained on the study's pool (the cache key
hashes the training problems). Same tiny model and warm-start settings, so the weights are exactly the
shipped ones; nothing else of the run changes.

    python benchmarks/curriculum_study.py data --out runs/cur-study/data
    python benchmarks/curriculum_study.py warm-start --data runs/cur-study/data

Guaranteed: the same arguments write the same files (the generator is seeded). Not guaranteed: that
the shipped warm start still matches the default (tests/trainer/test_warm_start_shipped.py checks that).
"""

from __future__ import annotations

import argparse
import shutil
from collections import Counter
from pathlib import Path

POOL = {0: 150, 1: 50, 2: 50, 3: 50}  # level -> prompts in the training pool
POOL_SEED = 11


def write_data(out: Path) -> None:
    from scalerl_env.sources.generators import generate
    from scalerl_env.sources.verl import write_records

    out.mkdir(parents=True, exist_ok=True)
    pool = []
    for level, n in POOL.items():
        pool += generate("math", seed=POOL_SEED, count=n, level=level)
    held = default_pools()["math"].holdout  # the CPU default's held-out split: the warm start never saw it
    held_ids = {r.prompt_id for r in held}
    pool = [r for r in {r.prompt_id: r for r in pool}.values() if r.prompt_id not in held_ids]
    write_records(pool, out / "pool-math.parquet")
    write_records(held, out / "heldout-math.parquet")
    levels = Counter(r.metadata["level"] for r in pool)
    print(f"pool: {len(pool)} prompts by level {dict(sorted(levels.items()))}; "
          f"held-out: {len(held)} level-0 (the CPU default's held-out split)")


def default_pools():
    """The CPU default's pools (math and code, level 0) after the long-prompt filter, as its runs build them."""
    from trainer.rollout.prompts import prepare_prompts, run_tokenizer
    from trainer.run.data_sources import build_data
    from trainer.run.resolve_config import build_config

    default = build_config(None, [], domains="math,code", model=None, engine=None, max_steps=None, resume=None)
    return prepare_prompts(default, run_tokenizer(default), build_data(default))[1]


def study_overrides(data: Path) -> list[str]:
    """The data overrides every run of the study gets (also printed for the `scalerl ablate` line)."""
    return [f'data.sources=[{{"domain": "math", "files": ["{data / "pool-math.parquet"}"]}}]',
            f'data.heldout={{"math": ["{data / "heldout-math.parquet"}"]}}']


def place_warm_start(data: Path) -> None:
    from trainer.rollout.prompts import prepare_prompts, run_tokenizer
    from trainer.run.data_sources import build_data
    from trainer.run.resolve_config import build_config
    from trainer.tiny.warm_start import SHIPPED, cache_key, cache_root, warm_start

    cfg = build_config(None, study_overrides(data), domains="math", model=None, engine=None, max_steps=None,
                       resume=None)
    shipped = warm_start(cfg.tiny, cfg.warm_start, [p for pool in default_pools().values() for p in pool.train])
    if not str(shipped).startswith(str(SHIPPED)):
        raise SystemExit(f"the default's warm start is not the shipped one ({shipped})")
    _, pools, _ = prepare_prompts(cfg, run_tokenizer(cfg), build_data(cfg))
    key = cache_key(cfg.tiny, cfg.warm_start, [p for pool in pools.values() for p in pool.train])
    target = cache_root() / "warm_start" / key
    if not (target / "config.json").exists():
        shutil.copytree(shipped, target)
    print(f"warm start {shipped.name} -> {target}")
    print("overrides: " + " ".join(f"'{o}'" for o in study_overrides(data)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("data").add_argument("--out", type=Path, required=True)
    sub.add_parser("warm-start").add_argument("--data", type=Path, required=True)
    args = ap.parse_args()
    if args.cmd == "data":
        write_data(args.out.resolve())
    else:
        place_warm_start(args.data.resolve())


if __name__ == "__main__":
    main()
