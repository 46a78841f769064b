"""Math verifier throughput: `VerifierPool.verify_batch` vs a plain single-process math-verify loop.

Workloads (RL-shaped, deterministic from --seed): each MATH-500 problem gets --samples completions.
A problem draws a pass rate p ~ U(0, 1); each sample is correct with probability p, truncated with no
answer with probability --truncated, and otherwise boxes one of three wrong answers fixed per problem
(other problems' answers), so groups repeat answers as real policies do.
- `--workload short` (the default): a correct sample is the reference solution itself or a short
  completion boxing the reference answer; a wrong one is a short completion; a truncated one the
  solution's first 200 characters before its box.
- `--workload worked`: every sample is a full solution as models write them: one of four openings,
  then the MATH-500 reference solution (hundreds of characters, the boxed answer at the end); a wrong
  sample is the same solution with a distractor in its last box; a truncated one the whole solution
  up to its last box. Samples of one prompt repeat texts and answers as a trained policy's do.

Baseline: `verify(parse("$\\boxed{answer}$"), parse(completion))` with math-verify defaults, one
item after another in this process. Both sides are warm before timing (math-verify imported and
exercised; pool workers started). Prints items/s for both, the ratio, the CPU seconds our side spent
(this process and the math workers), the largest per-item elapsed time against the deadline, and how
often the two verdicts agree (they differ where our policy differs: false-positive guard, extraction
rules).

    python benchmarks/bench_math.py                 # MATH-500 x 16 = 8000 items
    python benchmarks/bench_math.py --problems 100  # quicker
    python benchmarks/bench_math.py --workload worked  # full solutions as written
    python benchmarks/bench_math.py --workload worked --warm-seed 1  # steady state: a step of the run before
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections import Counter

import psutil
from scalerl.env.contracts.paths import reference_dir

REF = reference_dir() / "math500" / "test.jsonl"
TARGET_RATIO = {"short": 8.0, "worked": 15.0}  # per workload: the plain loop is slower on long texts
OPENINGS = ("", "Let's think step by step.\n\n", "We solve the problem carefully.\n", "Solution:\n")


def workload(problems: int, samples: int, truncated: float, seed: int, kind: str = "short") -> list[dict]:
    """`samples` completions per MATH-500 problem (module docstring); `kind` picks how one is written."""
    rng = random.Random(seed)
    rows = [json.loads(x) for x in REF.read_text().splitlines()][:problems]
    answers = [r["answer"] for r in rows]
    items = []
    for pi, row in enumerate(rows):
        p = rng.random()
        distractors = [a for a in rng.sample(answers, 4) if a != row["answer"]][:3]
        write = _worked_writer(row) if kind == "worked" else _short_writer(row)
        for s in range(samples):
            text = write(rng, truncated, truncated + (1 - truncated) * p, distractors)
            items.append({"id": f"{pi}-{s}", "domain": "math", "completion": text, "answer": row["answer"]})
    return items


def _short_writer(row: dict):
    """Cut before the box, the reference solution or a short boxed answer, or a boxed distractor."""
    def write(rng: random.Random, cut_below: float, correct_below: float, distractors: list[str]) -> str:
        r = rng.random()
        if r < cut_below:
            return row["solution"].split("\\boxed")[0][:200]
        if r < correct_below:
            boxed = f"Working it out, we get $\\boxed{{{row['answer']}}}$."
            return row["solution"] if rng.random() < 0.5 else boxed
        return f"After some algebra the result is $\\boxed{{{rng.choice(distractors)}}}$."
    return write


def _worked_writer(row: dict):
    """Full solutions: the reference solution behind an opening, its last box holding the reference answer
    or a distractor, or cut before that box."""
    head, _, tail = _split_last_box(row["solution"])

    def write(rng: random.Random, cut_below: float, correct_below: float, distractors: list[str]) -> str:
        r, opening = rng.random(), rng.choice(OPENINGS)
        if r < cut_below:
            return opening + head
        answer = row["answer"] if r < correct_below else rng.choice(distractors)
        return opening + head + "\\boxed{" + answer + "}" + tail
    return write


def _split_last_box(solution: str) -> tuple[str, str, str]:
    """(text before the last `\\boxed{`, the box's content, text after its closing brace)."""
    start = solution.rfind("\\boxed{")
    if start < 0:
        return solution + "\n\nThe answer is ", "", ""
    depth, end = 0, len(solution)
    for end in range(start + len("\\boxed"), len(solution)):
        depth += {"{": 1, "}": -1}.get(solution[end], 0)
        if depth == 0:
            break
    return solution[:start], solution[start + len("\\boxed{"):end], solution[end + 1:]


def baseline(items: list[dict], warm: list[dict]) -> tuple[list[bool], float]:
    from math_verify import parse, verify

    verify(parse("$\\boxed{\\frac{1}{2}}$"), parse("so $\\boxed{0.5}$"))  # warm-up, not timed
    for it in warm:  # --warm-seed: the same untimed batch as our side's
        verify(parse(f"$\\boxed{{{it['answer']}}}$"), parse(it["completion"]))
    start = time.perf_counter()
    out = [bool(verify(parse(f"$\\boxed{{{it['answer']}}}$"), parse(it["completion"]))) for it in items]
    return out, time.perf_counter() - start


def ours(items: list[dict], math_config, warm: list[dict]) -> tuple[list, float, dict]:
    from scalerl.verifiers import VerifierPool
    from scalerl.verifiers.verifier_config import VerifierConfig

    with VerifierPool(VerifierConfig(math=math_config)) as pool:
        while not pool.ready():
            time.sleep(0.05)
        if warm:
            pool.verify_batch(warm)
        processes = [psutil.Process(), *(psutil.Process(pid) for pid in pool.info()["math"]["pids"])]
        cpu_before = [process_cpu_s(p) for p in processes]
        start = time.perf_counter()
        verdicts = pool.verify_batch(items)
        elapsed = time.perf_counter() - start
        cpu = [process_cpu_s(p) - before for p, before in zip(processes, cpu_before)]
        return verdicts, elapsed, {**pool.info(), "cpu_s": {"parent": cpu[0], "workers": sum(cpu[1:])}}


def process_cpu_s(process: psutil.Process) -> float:
    """User + system CPU seconds of one process so far; 0 once it is gone (a killed worker)."""
    try:
        times = process.cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return times.user + times.system


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", choices=sorted(TARGET_RATIO), default="short", help="module docstring")
    ap.add_argument("--problems", type=int, default=500)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--truncated", type=float, default=0.05)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout-s", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warm-seed", type=int, default=None, help="steady state: both sides first score, untimed, "
                    "the same workload drawn with this seed (a run's earlier step: same prompts, other samples)")
    ap.add_argument("--no-fast-path", action="store_true", help="ablation: everything goes to sympy")
    ap.add_argument("--no-dedupe", action="store_true", help="ablation: score repeated pairs again")
    ap.add_argument("--second-opinion", type=float, default=None,
                    help="ablation: the share of negatives re-checked by plain math-verify (default: MathConfig's)")
    args = ap.parse_args()
    items = workload(args.problems, args.samples, args.truncated, args.seed, args.workload)
    target = TARGET_RATIO[args.workload]
    load_before = os.getloadavg()[0]
    from scalerl.verifiers.verifier_config import MathConfig

    share = {} if args.second_opinion is None else {"second_opinion": args.second_opinion}
    math_config = MathConfig(workers=args.workers, timeout_s=args.timeout_s, fast_path=not args.no_fast_path,
                             dedupe=not args.no_dedupe, **share)
    warm = [] if args.warm_seed is None else workload(args.problems, args.samples, args.truncated, args.warm_seed,
                                                      args.workload)
    verdicts, ours_s, info = ours(items, math_config, warm)
    base, base_s = baseline(items, warm)
    counts = Counter(v.status.value for v in verdicts)
    paths = Counter(v.details.get("path", "extraction") for v in verdicts)
    agree = sum((v.status.value == "correct") == b for v, b in zip(verdicts, base)) / len(items)
    worst = max(v.elapsed_s for v in verdicts)
    ratio = base_s / ours_s
    print(f"workload {args.workload}: {args.problems} MATH-500 problems x {args.samples} samples = {len(items)} items; "
          f"{len({(it['answer'], it['completion']) for it in items})} distinct (answer, completion)")
    print(f"verdicts: {dict(counts)}; decided by {dict(paths)}; "
          f"deduplicated {sum(bool(v.details.get('deduplicated')) for v in verdicts)}; second opinions "
          f"{dict(Counter(v.details['second_opinion'] for v in verdicts if 'second_opinion' in v.details))}")
    print(f"baseline math-verify loop: {base_s:8.2f} s  {len(items) / base_s:8.1f} items/s")
    print(f"verify_batch ({args.workers} workers, fast_path={math_config.fast_path}, "
          f"dedupe={math_config.dedupe}, second_opinion={math_config.second_opinion}): {ours_s:8.2f} s  "
          f"{len(items) / ours_s:8.1f} items/s")
    print(f"CPU during verify_batch: {info['cpu_s']['parent']:.2f} s in this process, "
          f"{info['cpu_s']['workers']:.2f} s in the math workers (load-independent, unlike the ratio)")
    print(f"slowest item {worst:.3f} s (deadline {args.timeout_s} s); timeouts {counts.get('timeout', 0)}; "
          f"kills {info['math']['kills']}; agreement with baseline {100 * agree:.2f}%")
    print(f"load average (1 min) {load_before:.2f} at start, {os.getloadavg()[0]:.2f} at end; "
          f"host cpus {os.cpu_count()}")
    print(f"ratio {ratio:.2f}x (target >= {target}x): {'PASS' if ratio >= target else 'FAIL'}")
    ok = ratio >= target and worst < args.timeout_s and counts.get("timeout", 0) == 0
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
