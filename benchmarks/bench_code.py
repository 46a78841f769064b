"""Code verifier throughput on MBPP versus a naive baseline, same machine, same run.

Workload: PRIME's 399 MBPP-sanitized reference programs with their asserts (the first `--n`).
Baseline: each program + its tests written to a file and run with
`subprocess.run([sys.executable, file])`: one fresh interpreter per test, no isolation at all.
Verifier: `CodeVerifier` with every isolation layer this host allows (strict on CI), `slots` fork
servers; measured with 1 slot (same parallelism as the baseline) and with `--slots` (default 2).
Prints executions per second, the ratio verifier / baseline (target: >= 20x with every layer on) and
the load average at start and end (the machine may be shared; `bench_code_phases.py` shows where the
time of one execution goes).

Usage: python benchmarks/bench_code.py [--n 150] [--slots 2] [--rounds 3] [--all]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from scalerl.env.contracts.paths import reference_dir
from scalerl.env.contracts.records import VerifyItem
from scalerl.verifiers.code.converters import from_mbpp
from scalerl.verifiers.code.judge import CodeVerifier
from scalerl.verifiers.verifier_config import CodeConfig

MBPP = os.path.join(reference_dir(), "mbpp_sanitized_prime", "new_mbpp.json")
# Task 123 spends ~3 s of CPU in the program itself, identically in both arms; with it the ratio would
# measure that program, not execution overhead. Excluded unless --all.
HEAVY = {123}


def baseline(rows: list[dict]) -> tuple[float, int]:
    """Seconds and passes for one `subprocess.run([sys.executable, file])` per program."""
    passed = 0
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i, r in enumerate(rows):
            path = os.path.join(d, f"t{i}.py")
            with open(path, "w") as f:
                f.write("\n".join(r["test_imports"]) + "\n" + r["code"] + "\n\n" + "\n".join(r["test_list"]) + "\n")
            paths.append(path)
        t0 = time.perf_counter()
        for path in paths:
            proc = subprocess.run([sys.executable, path], capture_output=True, timeout=60, cwd=d, check=False)
            passed += proc.returncode == 0
        return time.perf_counter() - t0, passed


def verifier_run(verifier: CodeVerifier, rows: list[dict]) -> tuple[float, int]:
    items = [VerifyItem(id=str(r["task_id"]), domain="code", completion=r["code"], tests=from_mbpp(r),
                        limits={"time_s": 10.0}) for r in rows]
    t0 = time.perf_counter()
    verdicts = verifier.verify_many(items)
    return time.perf_counter() - t0, sum(x.status.value == "correct" for x in verdicts)


def measure(rows: list[dict], slots: int, rounds: int) -> dict:
    """Arms interleaved chunk by chunk, so load changes on a shared machine hit all three alike."""
    totals = {"baseline": [0.0, 0], "one": [0.0, 0], "many": [0.0, 0]}
    with CodeVerifier(CodeConfig(slots=1)) as one, CodeVerifier(CodeConfig(slots=slots)) as many:
        warm = rows[:slots]
        verifier_run(one, warm[:1]), verifier_run(many, warm)  # start the fork servers outside the timing
        for k in range(rounds):
            chunk = rows[k::rounds]
            for arm, fn in (("baseline", lambda c=chunk: baseline(c)), ("one", lambda c=chunk: verifier_run(one, c)),
                            ("many", lambda c=chunk: verifier_run(many, c))):
                secs, ok = fn()
                totals[arm][0] += secs
                totals[arm][1] += ok
        return {"totals": totals, "layers": many.layers()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=150, help="MBPP programs to run (max 399)")
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (chunks of the workload)")
    ap.add_argument("--all", action="store_true", help="keep task 123 (3 s of program CPU) in the workload")
    args = ap.parse_args()
    with open(MBPP) as f:
        rows = [r for r in json.load(f) if args.all or r["task_id"] not in HEAVY][: args.n]
    n = len(rows)
    load_before = os.getloadavg()[0]
    m = measure(rows, args.slots, args.rounds)
    (base_s, base_ok), (one_s, one_ok), (many_s, many_ok) = (m["totals"][a] for a in ("baseline", "one", "many"))
    layers = m["layers"]
    active = sorted(k for k, on in layers["layers"].items() if on)
    print(f"workload: {n} MBPP programs with their asserts{'' if args.all else ' (task 123 excluded)'}; "
          f"{args.rounds} interleaved rounds; host cpus: {os.cpu_count()}; load average (1 min) "
          f"{load_before:.2f} at start, {os.getloadavg()[0]:.2f} at end")
    print(f"sandbox level {layers['level']}; layers on: {', '.join(active)}")
    print(f"baseline subprocess.run per test : {n / base_s:8.1f} exec/s  ({base_ok}/{n} pass, {base_s:.2f} s)")
    print(f"verifier, 1 slot                 : {n / one_s:8.1f} exec/s  ({one_ok}/{n} correct, {one_s:.2f} s)"
          f"  ratio {base_s / one_s:.1f}x")
    print(f"verifier, {args.slots} slots                : {n / many_s:8.1f} exec/s  ({many_ok}/{n} correct, "
          f"{many_s:.2f} s)  ratio {base_s / many_s:.1f}x")
    print(json.dumps({"n": n, "baseline_exec_per_s": n / base_s, "verifier_1slot_exec_per_s": n / one_s,
                      "verifier_exec_per_s": n / many_s, "ratio_1slot": base_s / one_s,
                      "ratio": base_s / many_s, "slots": args.slots, "level": layers["level"]}))
    return 0 if one_ok == many_ok == base_ok == n else 1


if __name__ == "__main__":
    sys.exit(main())
