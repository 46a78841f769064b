"""Inputs of the `scalerl train` curriculum study (docs/curriculum.md, "Study: a mixed-difficulty pool").

`data`: writes the training pool (generated math of levels 0-3 in one parquet file, so the sampler draws
it uniformly) and the fixed held-out file every run validates on.
`warm-start`: puts the CPU default's shipped warm start (trained on the default level-0 pool, see
`scalerl.trainer.tiny.warm_start`) in the user cache under the key of the run's own pool, so every run of the
study starts from that one policy instead of a warm start trained on the study's pool (the cache key
hashes the training problems). Same tiny model and warm-start settings, so the weights are exactly the
shipped ones; nothing else of the run changes.

    python benchmarks/curriculum_study.py data --out runs/cur-study/data
    python benchmarks/curriculum_study.py warm-start --data runs/cur-study/data
    python benchmarks/curriculum_study.py summary --study runs/cur-study/study

`summary`: per run and per variant (mean ± standard error over seeds) the held-out pass rate at the
budget and at half of it, the share of generated groups with gradient (not zero-variance), the mean
effective batch, GRESO skips, retired prompts, refilled groups and draws per pool prompt, and each
variant's difference from the baseline with its standard error (resolved when |Δ| > 2 SE).

Guaranteed: the same arguments write the same files (the generator is seeded). Not guaranteed: that
the shipped warm start still matches the default (tests/trainer/test_warm_start_shipped.py checks that).
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
from scalerl.env.sources.verl import read_records

POOL = {0: 150, 1: 50, 2: 50, 3: 50}  # level -> prompts in the training pool
POOL_SEED = 11
HALF_BUDGET = 4000  # samples: half the study's budget (evaluations every 5 steps fall elsewhere per variant)


def write_data(out: Path) -> None:
    from scalerl.env.sources.generators import generate
    from scalerl.env.sources.verl import write_records

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
    from scalerl.trainer.config.resolve import RunFlags, resolve_config
    from scalerl.trainer.rollout.prompts import prepare_prompts, run_tokenizer
    from scalerl.trainer.run.data_sources import build_data

    default, _ = resolve_config(flags=RunFlags(domains="math,code"))
    return prepare_prompts(default, run_tokenizer(default), build_data(default))[1]


def study_overrides(data: Path) -> list[str]:
    """The data overrides every run of the study gets (also printed for the `scalerl ablate` line)."""
    return [f'data.sources=[{{"domain": "math", "files": ["{data / "pool-math.parquet"}"]}}]',
            f'data.heldout={{"math": ["{data / "heldout-math.parquet"}"]}}']


def place_warm_start(data: Path) -> None:
    from scalerl.trainer.config.resolve import RunFlags, resolve_config
    from scalerl.trainer.rollout.prompts import prepare_prompts, run_tokenizer
    from scalerl.trainer.run.data_sources import build_data
    from scalerl.trainer.tiny.warm_start import SHIPPED, cache_key, cache_root, warm_start

    cfg, _ = resolve_config(None, study_overrides(data), RunFlags(domains="math"))
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


LEVEL_SQL = """WITH g AS (
    SELECT json_extract(p.metadata, '$.level')::INT AS level, a.prompt_id, a.step,
           count(*) FILTER (WHERE a.correct) AS c, count(*) AS n
    FROM attempts a JOIN problems p USING (prompt_id) WHERE a.step > 0 GROUP BY ALL)
SELECT avg((level = 0)::INT), count(*) FILTER (WHERE level = 0 AND c > 0 AND c < n)
           / count(*) FILTER (WHERE c > 0 AND c < n),
       (SELECT count(*) FROM retired r JOIN problems p USING (prompt_id)
        WHERE json_extract(p.metadata, '$.level')::INT = 0)
FROM g"""


def run_counts(folder: Path, pool_size: int) -> dict[str, float]:
    """What one run did, from its metrics.jsonl and its ledger."""
    import duckdb

    with duckdb.connect(str(folder / "ledger.duckdb"), read_only=True) as con:
        level0_groups, level0_informative, level0_retired = con.execute(LEVEL_SQL).fetchone()
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = [r for r in rows if r.get("kind") == "step"]
    vals = [(r["compute_samples"], r["val"]["math"]["pass_rate"]) for r in rows if r.get("kind") == "validation"]
    groups = sum(r["groups/math"] for r in steps)  # every group the step took (refills included)
    zero = sum(r["zero_variance_fraction"] * r["groups/math"] for r in steps)
    budget = steps[-1]["compute_samples"]
    return {"steps": len(steps), "samples": budget, "final": vals[-1][1],
            "half": float(np.interp(HALF_BUDGET, *zip(*vals))),  # between the two evaluations around it
            "informative": 1 - zero / groups,
            "effective_batch": float(np.mean([r["effective_batch_fraction"] for r in steps])),
            "skipped": sum(r.get("curriculum/skipped_easy", 0) + r.get("curriculum/skipped_hard", 0) for r in steps),
            "retired": steps[-1]["retired_count"], "refilled": sum(r["curriculum/refilled"] for r in steps),
            "draws_per_prompt": groups / pool_size, "level0_groups": level0_groups,
            "level0_of_informative": level0_informative, "level0_retired": level0_retired}


def summary(study: Path) -> None:
    manifest = json.loads((study / "manifest.json").read_text())
    pool = len(read_records(Path(json.loads(manifest["runs"][0]["overrides"][0].split("=", 1)[1])[0]["files"][0]))[0])
    by: dict[str, list[dict[str, float]]] = {}
    for run in manifest["runs"]:
        if (study / run["folder"] / "summary.json").exists():
            by.setdefault(run["variant"], []).append(run_counts(study / run["folder"], pool))
    keys = ["final", "half", "informative", "effective_batch", "skipped", "retired", "refilled", "draws_per_prompt",
            "steps", "level0_groups", "level0_of_informative", "level0_retired"]
    print(f"pool {pool} prompts; mean ± standard error over seeds; Δ vs baseline ± its SE (* = |Δ| > 2 SE)")
    print("| variant | seeds | " + " | ".join(keys) + " | Δ final | Δ half |")
    print("|" + "---|" * (len(keys) + 4))
    base = by["baseline"]
    for name, runs in by.items():
        cells = []
        for k in keys:
            x = np.array([r[k] for r in runs])
            cells.append(f"{x.mean():.3f} ± {x.std(ddof=1) / np.sqrt(len(x)):.3f}")
        deltas = []
        for k in ("final", "half"):
            a, b = np.array([r[k] for r in runs]), np.array([r[k] for r in base])
            d = a.mean() - b.mean()
            se = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
            deltas.append("–" if name == "baseline" else f"{d:+.3f} ± {se:.3f}{' *' if abs(d) > 2 * se else ''}")
        print(f"| {name} | {len(runs)} | " + " | ".join(cells) + " | " + " | ".join(deltas) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("data").add_argument("--out", type=Path, required=True)
    sub.add_parser("warm-start").add_argument("--data", type=Path, required=True)
    sub.add_parser("summary").add_argument("--study", type=Path, required=True)
    args = ap.parse_args()
    if args.cmd == "data":
        write_data(args.out.resolve())
    elif args.cmd == "summary":
        summary(args.study)
    else:
        place_warm_start(args.data.resolve())


if __name__ == "__main__":
    main()
