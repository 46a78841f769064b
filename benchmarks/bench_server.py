"""Reward-server overhead: the same items through `scalerl-env serve` (HTTP, N concurrent requests)
and through the in-process batch API (`VerifierPool.verify_batch`, N concurrent threads).

Workload: RL-shaped groups. Math groups are MATH-500 problems x --samples completions (the
`bench_math.workload` generator: reference solutions, short boxed answers, wrong answers, truncations);
code groups are MBPP (sanitized, CodeT format, bodies re-indented) with the reference solution or a
broken one, --code-samples per task. One request / one `verify_batch` call = one group.

Both sides use the same verifier config (--workers math workers and sandbox slots), are warm before
timing (workers ready, sandbox started), and run one after the other on the same machine (the pool
of the in-process run is closed before the server starts). The client runs in this process, so on a
small machine it competes with the server for CPU; that cost is part of what is measured.
Prints items/s of each, the ratio (target >= 0.8), p50/p99 latency per group, and whether the two
runs gave identical verdicts.

    python benchmarks/bench_server.py                        # 100 problems x 16 + 24 tasks x 8
    python benchmarks/bench_server.py --problems 500 --code-tasks 64
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_math import workload  # noqa: E402  (one workload generator for both math benchmarks)

MBPP = HERE.parents[1] / "shared" / "reference" / "mbpp_sanitized_codet" / "mbpp_sanitized_for_code_generation.jsonl"
TARGET_RATIO = 0.8


def code_groups(tasks: int, samples: int) -> list[list[dict]]:
    rows = [json.loads(x) for x in MBPP.read_text().splitlines()][:tasks]
    groups = []
    for t, row in enumerate(rows):
        body = textwrap.indent(textwrap.dedent(row["canonical_solution"].expandtabs(4)), "    ")
        good = f"```python\n{row['prompt']}{body}\n```"
        bad = f"```python\n{row['prompt']}    return None\n```"
        tests = {"kind": "assert", "code": f"{row['test']}\ncheck({row['entry_point']})",
                 "entry_point": row["entry_point"]}
        groups.append([{"id": f"c{t}-{s}", "domain": "code", "completion": good if s % 2 == 0 else bad,
                        "tests": tests} for s in range(samples)])
    return groups


def math_groups(problems: int, samples: int, seed: int) -> list[list[dict]]:
    items = workload(problems, samples, 0.05, seed)
    return [items[i:i + samples] for i in range(0, len(items), samples)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run_in_process(groups: list[list[dict]], config, concurrency: int) -> tuple[dict, float, list[float]]:
    from verifiers import VerifierPool

    with VerifierPool(config) as pool:
        warm(lambda batch: pool.verify_batch(batch), pool.ready, groups)
        latencies: list[float] = []

        def one(group: list[dict]) -> list:
            start = time.perf_counter()
            out = pool.verify_batch(group)
            latencies.append(time.perf_counter() - start)
            return out

        start = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as ex:
            results = list(ex.map(one, groups))
        elapsed = time.perf_counter() - start
    return {v.id: v.status.value for r in results for v in r}, elapsed, latencies


def warm(verify, ready, groups: list[list[dict]]) -> None:
    while not ready():
        time.sleep(0.05)
    for domain in ("math", "code"):
        sample = next((g[:1] for g in groups if g[0]["domain"] == domain), None)
        if sample:
            verify(sample)


def start_server(workers: int) -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "scalerl_env.cli", "serve", "--port", str(port), "--workers", str(workers),
           "--set", "limits.max_items_in_flight=4096", "--set", "limits.max_batch_items=1024"]
    proc = subprocess.Popen(cmd, cwd=HERE.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    return proc, f"http://127.0.0.1:{port}"


def server_ready(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


async def post_all(url: str, groups: list[list[dict]], concurrency: int) -> tuple[list, list[float], float]:
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as http:
        async def one(group: list[dict]) -> list:
            async with gate:
                start = time.perf_counter()
                response = await http.post("/v1/verify", json={"items": group})
                latencies.append(time.perf_counter() - start)
            response.raise_for_status()
            return response.json()["results"]

        start = time.perf_counter()
        results = await asyncio.gather(*(one(g) for g in groups))
        return results, latencies, time.perf_counter() - start


def run_server(groups: list[list[dict]], workers: int, concurrency: int) -> tuple[dict, float, list[float]]:
    proc, url = start_server(workers)
    try:
        post = lambda batch: httpx.post(url + "/v1/verify", json={"items": batch}, timeout=600)  # noqa: E731
        warm(post, lambda: server_ready(url), groups)
        results, latencies, elapsed = asyncio.run(post_all(url, groups, concurrency))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    return {v["id"]: v["status"] for r in results for v in r}, elapsed, latencies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", type=int, default=100)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--code-tasks", type=int, default=24)
    ap.add_argument("--code-samples", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2, help="math workers and sandbox slots, both sides")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from verifiers.config import VerifierConfig

    config = VerifierConfig.model_validate({"math": {"workers": args.workers}, "code": {"slots": args.workers}})
    groups = math_groups(args.problems, args.samples, args.seed) + code_groups(args.code_tasks, args.code_samples)
    groups = [groups[i] for i in sorted(range(len(groups)), key=lambda i: (i * 7919) % len(groups))]  # interleave
    n = sum(len(g) for g in groups)
    local, local_s, local_lat = run_in_process(groups, config, args.concurrency)
    remote, remote_s, remote_lat = run_server(groups, args.workers, args.concurrency)
    ratio = local_s / remote_s
    print(f"workload: {len(groups)} groups, {n} items ({args.problems}x{args.samples} math, "
          f"{args.code_tasks}x{args.code_samples} code); concurrency {args.concurrency}; workers {args.workers}")
    for name, secs, lat in (("in-process verify_batch", local_s, local_lat), ("HTTP /v1/verify", remote_s, remote_lat)):
        print(f"{name:24s} {secs:7.2f} s {n / secs:8.1f} items/s  group latency p50 "
              f"{1000 * statistics.median(lat):7.1f} ms  p99 {1000 * percentile(lat, 0.99):7.1f} ms")
    same = local == remote
    print(f"identical verdicts: {same}" + ("" if same else f" ({sum(local[k] != remote.get(k) for k in local)} differ)"))
    print(f"ratio server/in-process {ratio:.2f} (target >= {TARGET_RATIO}): {'PASS' if ratio >= TARGET_RATIO else 'FAIL'}")
    raise SystemExit(0 if ratio >= TARGET_RATIO and same else 1)


if __name__ == "__main__":
    main()
