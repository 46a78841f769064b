"""The CLI's I/O cost: `scalerl-env verify`'s path (read and validate JSONL, score, serialize, write)
against the in-process batch API (`VerifierPool.verify_batch` on dicts), in one process, one pool.

Both sides score the same items with the same warm pool (one untimed batch first, so both meet the
same caches); the two are timed alternately, --rounds times, and the medians are printed, with the
CLI's phases (parse + validate, score, serialize, write) and its overhead scaled to 8,000 items.
The workload is benchmarks/bench_math.py's (MATH-500 x 16 by default), each item with a ledger
context (`prompt_id`, `step`) so the context fields are serialized too.

    python benchmarks/bench_verify_cli.py                 # 8,000 items, 5 rounds
    python benchmarks/bench_verify_cli.py --problems 100  # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

PER_ITEMS = 8000


def cli_path(pool, source: Path, out: Path) -> dict[str, float]:
    """The command's own functions, phase by phase (scalerl.env.commands.verify)."""
    from scalerl.env.commands.verify import read_items, verdict_lines
    from scalerl.env.contracts.config_loader import atomic_write_text

    marks = [time.perf_counter()]
    items = read_items(str(source))
    marks.append(time.perf_counter())
    verdicts = pool.verify_batch(items)
    marks.append(time.perf_counter())
    data = verdict_lines(items, verdicts)
    marks.append(time.perf_counter())
    atomic_write_text(out, data)
    marks.append(time.perf_counter())
    phases = dict(zip(("read", "score", "serialize", "write"), (b - a for a, b in zip(marks, marks[1:]))))
    return {**phases, "total": marks[-1] - marks[0]}


def in_process(pool, rows: list[dict]) -> float:
    start = time.perf_counter()
    pool.verify_batch(rows)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", type=int, default=500)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workload", choices=("short", "worked"), default="short")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_math is a sibling script, not a package
    from bench_math import workload
    from scalerl.verifiers import VerifierPool

    rows = workload(args.problems, args.samples, 0.05, 0, args.workload)
    for row in rows:
        row.update(prompt_id=f"p{row['id'].split('-')[0]}", step=1)
    with tempfile.TemporaryDirectory() as tmp, VerifierPool() as pool:
        source, out = Path(tmp) / "items.jsonl", Path(tmp) / "verdicts.jsonl"
        source.write_text("".join(json.dumps(row) + "\n" for row in rows))
        while not pool.ready():
            time.sleep(0.05)
        pool.verify_batch(rows)  # untimed: both sides then meet the same caches
        runs, base = [], []
        for _ in range(args.rounds):
            base.append(in_process(pool, rows))
            runs.append(cli_path(pool, source, out))
    scale = PER_ITEMS / len(rows)
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    base_s = statistics.median(base)
    print(f"{len(rows)} items ({args.workload}), {args.rounds} alternating rounds, medians; "
          f"load average (1 min) {os.getloadavg()[0]:.2f}, host cpus {os.cpu_count()}")
    print(f"in-process verify_batch(dicts): {base_s:.3f} s")
    print("CLI path: " + ", ".join(f"{key} {value:.3f} s" for key, value in median.items()))
    print(f"CLI overhead per {PER_ITEMS:,} items: {(median['total'] - base_s) * scale * 1000:.0f} ms "
          f"(I/O alone: read + serialize + write = "
          f"{(median['read'] + median['serialize'] + median['write']) * scale * 1000:.0f} ms; "
          f"the in-process call validates the same dicts inside its {base_s:.3f} s)")


if __name__ == "__main__":
    main()
