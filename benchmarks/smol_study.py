"""Read the SmolLM2 study's runs (docs/results.md, "SmolLM2 learns: the study").

`summary RUN...`: per run and domain the held-out pass rate at each evaluation with its standard error
(from the evaluation count), the last minus the first in standard errors of the difference, and, with
`--rescore`, the held-out code samples in `rollouts.jsonl` scored again on the tests the installed generator
writes for the same prompts (`data_sources.build_data` over the run's own `config.yaml`). A run made
before a generator's tests changed is thus read on the current tests: a rise that survives is not a
weak test passed by a trivial program.
`mean RUN... --csv OUT`: the seeds' mean curve per domain at equal steps (so equal samples), with the
standard error of the mean from the evaluation counts and the spread between seeds, written as a CSV
that `scalerl fit --csv OUT --compute-col samples --reward-col code` fits (one column per run too).
`rollouts RUN --domain D --first S --last T`: the held-out samples of step S and step T side by side,
per prompt (the before/after reading).

    python benchmarks/smol_study.py summary runs/smol-s0 runs/smol-s1 --rescore
    python benchmarks/smol_study.py mean runs/smol3-s0 runs/smol3-s1 runs/smol3-s2 --csv mean.csv
    python benchmarks/smol_study.py rollouts runs/smol-s0 --domain code --first 0 --last 48

Guaranteed: numbers come from the run folders as written; rescoring runs the real sandboxed code
verifier. Not guaranteed: a rescore covers only the samples the run logged (`rollout_log`).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml


def evaluations(run: Path) -> list[dict[str, Any]]:
    """The run's validation lines, one per step (a resumed run may repeat one)."""
    seen: dict[int, dict[str, Any]] = {}
    for line in (run / "metrics.jsonl").open():
        row = json.loads(line)
        if row.get("kind") == "validation":
            seen.setdefault(row["step"], row)
    return [seen[s] for s in sorted(seen)]


def se(p: float, n: float) -> float:
    return math.sqrt(p * (1 - p) / n) if n else float("nan")


def change_in_se(p0: float, n0: float, p1: float, n1: float) -> float:
    spread = math.sqrt(p0 * (1 - p0) / n0 + p1 * (1 - p1) / n1)
    return (p1 - p0) / spread if spread else 0.0


def rollouts(run: Path, kind: str = "validation") -> list[dict[str, Any]]:
    return [r for r in map(json.loads, (run / "rollouts.jsonl").open()) if r["kind"] == kind]


def rescored(run: Path, domain: str = "code") -> dict[int, tuple[int, int, int]]:
    """step -> (samples, correct as the run scored them, correct on the tests the installed generator
    writes now) for `domain`'s logged held-out samples."""
    from scalerl.env.contracts.records import VerifyItem
    from scalerl.trainer.config.train import TrainConfig
    from scalerl.trainer.run.data_sources import build_data
    from scalerl.verifiers import verify_batch

    cfg = TrainConfig.model_validate(yaml.safe_load((run / "config.yaml").read_text()))
    tests = {r.prompt_id: r.tests for r in build_data(cfg)[domain].holdout}
    rows = [r for r in rollouts(run) if r["domain"] == domain and r["prompt_id"] in tests]
    verdicts = verify_batch([VerifyItem(id=str(i), domain=domain, completion=r["completion"],
                                        tests=tests[r["prompt_id"]]) for i, r in enumerate(rows)])
    out: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    for r, v in zip(rows, verdicts):
        counts = out[r["step"]]
        counts[0] += 1
        counts[1] += r["status"] == "correct"
        counts[2] += v.status == "correct"
    return {step: tuple(c) for step, c in sorted(out.items())}


def summary(runs: list[Path], rescore: bool) -> None:
    for run in runs:
        evals = evaluations(run)
        print(f"== {run} ({len(evals)} evaluations, steps {evals[0]['step']}..{evals[-1]['step']})")
        for domain in evals[0]["val"]:
            cells = [(e["step"], e["val"][domain]["pass_rate"], e["val"][domain]["n"]) for e in evals]
            (_, p0, n0), (_, p1, n1) = cells[0], cells[-1]
            line = "  ".join(f"{s}: {p:.3f}±{se(p, n):.3f}" for s, p, n in cells)
            print(f"  {domain:5s} {line}   last-first {p1 - p0:+.3f} = {change_in_se(p0, n0, p1, n1):+.2f} SE")
        if rescore and "code" in evals[0]["val"]:
            for step, (n, ran, now) in rescored(run).items():
                print(f"  code step {step}: {n} logged samples, {ran} correct as run, {now} on the current tests "
                      f"({now / n:.3f})")


def mean_curve(runs: list[Path], out: Path | None) -> None:
    """Mean over runs at the steps every run evaluated; rows of the CSV are those steps. Validation samples
    with seed = policy version, so the runs' step-0 evaluations are one evaluation of the starting policy
    (its standard error is that of one run); later ones are of different policies, taken as independent."""
    evals = {run: {e["step"]: e for e in evaluations(run)} for run in runs}
    steps = sorted(set.intersection(*(set(by_step) for by_step in evals.values())))
    domains = list(evals[runs[0]][steps[0]]["val"])
    table: list[dict[str, float]] = []
    for step in steps:
        rows = [evals[run][step] for run in runs]
        cells: dict[str, float] = {"step": step, "samples": rows[0]["compute_samples"]}
        for domain in domains:
            rates = [r["val"][domain]["pass_rate"] for r in rows]
            counts = [r["val"][domain]["n"] for r in rows]
            mean = sum(rates) / len(rates)
            cells[domain] = mean
            if all(r["compute_samples"] == 0 for r in rows):  # one policy, one sampling seed: one evaluation
                cells[f"{domain}_se"] = se(rates[0], counts[0])
            else:
                cells[f"{domain}_se"] = math.sqrt(sum(se(p, n) ** 2 for p, n in zip(rates, counts))) / len(rates)
            cells[f"{domain}_seed_sd"] = statistics.stdev(rates) if len(rates) > 1 else 0.0
            cells.update({f"{domain}_{run.name}": p for run, p in zip(runs, rates)})
        table.append(cells)
    print(f"mean of {len(runs)} runs ({', '.join(r.name for r in runs)}) at {len(steps)} common steps")
    for domain in domains:
        line = "  ".join(f"{c['step']}: {c[domain]:.3f}±{c[f'{domain}_se']:.3f}" for c in table)
        first, last = table[0], table[-1]
        spread = math.hypot(first[f"{domain}_se"], last[f"{domain}_se"])
        change = last[domain] - first[domain]
        print(f"  {domain:5s} {line}   last-first {change:+.3f} = {change / spread if spread else 0.0:+.2f} SE"
              f"  (seed sd at the last step {last[f'{domain}_seed_sd']:.3f})")
    if out is not None:
        with out.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(table[0]))
            writer.writeheader()
            writer.writerows(table)
        print(f"wrote {out}")


def side_by_side(run: Path, domain: str, first: int, last: int, width: int) -> None:
    rows = [r for r in rollouts(run) if r["domain"] == domain and r["step"] in (first, last)]
    by_prompt: dict[str, dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by_prompt[r["prompt_id"]][r["step"]].append(r)
    for pid, steps in by_prompt.items():
        if first in steps and last in steps:
            print(f"-- {pid}")
            for step in (first, last):
                for r in steps[step]:
                    print(f"  {step:>3} {r['status']:8s} {r['completion'][:width]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary")
    s.add_argument("runs", nargs="+", type=Path)
    s.add_argument("--rescore", action="store_true", help="score logged code samples on the current tests")
    m = sub.add_parser("mean")
    m.add_argument("runs", nargs="+", type=Path)
    m.add_argument("--csv", type=Path, help="write the mean curve (and each run's) as CSV")
    r = sub.add_parser("rollouts")
    r.add_argument("run", type=Path)
    r.add_argument("--domain", default="code")
    r.add_argument("--first", type=int, default=0)
    r.add_argument("--last", type=int, required=True)
    r.add_argument("--width", type=int, default=160)
    args = parser.parse_args()
    if args.cmd == "summary":
        summary(args.runs, args.rescore)
    elif args.cmd == "mean":
        mean_curve(args.runs, args.csv)
    else:
        side_by_side(args.run, args.domain, args.first, args.last, args.width)


if __name__ == "__main__":
    main()
