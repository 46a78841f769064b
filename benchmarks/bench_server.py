"""Reward-server overhead: the same items through `scalerl-env serve` (HTTP, N client threads with keep-alive
connections) and through the in-process batch API (`VerifierPool.verify_batch`, N concurrent threads).

Workload: RL-shaped groups. Math groups are MATH-500 problems x --samples completions (the
`bench_math.workload` generator: reference solutions, short boxed answers, wrong answers, truncations);
code groups are MBPP (sanitized, CodeT format, bodies re-indented) with the reference solution or a
broken one, --code-samples per task. One request / one `verify_batch` call = one group.

Both sides use the same verifier config (--workers math workers and sandbox slots) and are warm
before timing (workers ready, sandbox started). Both call from the same N threads, which (with the
HTTP side's connections) last from round to round, as a trainer's do from step to step. Rounds
alternate, in-process then HTTP, --repeats times, so a busy machine slows both alike; the median round
of each side is reported. The HTTP client runs in this process, so on a small machine it competes with
the server's verifier workers for CPU; that cost is part of what is measured. Prints items/s of each,
the ratio of medians (target >= 0.95), p50/p99 latency per group, whether every round gave identical
verdicts, the load average, the CPU time of each round's Python processes (in-process: this process;
HTTP: the client threads here plus the server process, its event loop apart; the verifier subprocesses
do the same work on both sides and are left out), and a profile of the server's event loop (CPU time)
during two extra, untimed rounds (what HTTP adds). On a machine that the verifiers keep busy, the CPU
the HTTP side adds is what it loses in throughput, so the CPU line says where a ratio below 1 comes
from with far less noise than the ratio itself.

    python benchmarks/bench_server.py                        # 100 problems x 16 + 24 tasks x 8
    python benchmarks/bench_server.py --problems 500 --code-tasks 64
"""

from __future__ import annotations

import argparse
import glob
import http.client
import io
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_math import workload  # one workload generator for both math benchmarks
from scalerl.env.contracts.paths import reference_dir

MBPP = reference_dir() / "mbpp_sanitized_codet" / "mbpp_sanitized_for_code_generation.jsonl"
TARGET_RATIO = 0.95


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
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed_round(call, requests: list, ex: ThreadPoolExecutor) -> tuple[list, float, list[float]]:
    """`call` on every request from the caller threads: (results in order, seconds, latency of each)."""
    latencies: list[float] = []

    def one(request):
        start = time.perf_counter()
        out = call(request)
        latencies.append(time.perf_counter() - start)
        return out

    start = time.perf_counter()
    results = list(ex.map(one, requests))
    return results, time.perf_counter() - start, latencies


def time_in_process(pool, groups: list[list[dict]], ex: ThreadPoolExecutor) -> tuple[dict, float, list[float]]:
    results, elapsed, latencies = timed_round(pool.verify_batch, groups, ex)
    return {v.id: v.status.value for r in results for v in r}, elapsed, latencies


def warm(verify, ready, groups: list[list[dict]]) -> None:
    while not ready():
        time.sleep(0.05)
    from scalerl.env.contracts.domains import domain_names

    for domain in domain_names():
        sample = next((g[:1] for g in groups if g[0]["domain"] == domain), None)
        if sample:
            verify(sample)


def start_server(workers: int, profile_out: Path | None = None) -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "scalerl.env.cli", "serve", "--port", str(port), "--workers", str(workers),
           "--set", "limits.max_items_in_flight=4096", "--set", "limits.max_batch_items=1024"]
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    if profile_out is not None:
        env["SCALERL_SERVER_PROFILE"] = str(profile_out)  # the app profiles its event loop while serving
    proc = subprocess.Popen(cmd, cwd=HERE.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return proc, f"http://127.0.0.1:{port}"


def server_ready(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


class KeepAlivePoster:
    """One persistent stdlib HTTP/1.1 connection per client thread. httpx's AsyncClient costs ~5 ms of
    client CPU per request at concurrency 32 (measured here), which would benchmark httpx, not the server."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.address = (host, int(port))
        self.local = threading.local()

    def post(self, path: str, body: bytes) -> dict:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection(*self.address, timeout=600)
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        payload = response.read()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {payload[:300]!r}")
        return json.loads(payload)


def time_server(poster: KeepAlivePoster, groups: list[list[dict]],
                ex: ThreadPoolExecutor) -> tuple[dict, float, list[float]]:
    bodies = [json.dumps({"items": g}).encode() for g in groups]  # a trainer has its request ready too
    results, elapsed, latencies = timed_round(lambda body: poster.post("/v1/verify", body)["results"], bodies, ex)
    return {v["id"]: v["status"] for r in results for v in r}, elapsed, latencies


def cpu_s(server_pid: int) -> tuple[float, float, float]:
    """CPU seconds so far of this process (exited threads included), of the server process (all its
    threads) and of the server's event-loop thread (its main thread)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    server = loop = 0.0
    for path in glob.glob(f"/proc/{server_pid}/task/*/schedstat"):
        try:
            seconds = int(Path(path).read_text().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):  # a thread that ended meanwhile
            continue
        server += seconds
        if path == f"/proc/{server_pid}/task/{server_pid}/schedstat":
            loop = seconds
    return usage.ru_utime + usage.ru_stime, server, loop


def alternate(groups: list[list[dict]], config, workers: int, concurrency: int, repeats: int) -> dict:
    """Both sides warm and idle-waiting; rounds alternate (A B A B ...) so machine noise hits both alike.
    An idle side costs nothing: its verifier workers block on their pipes. The caller threads (and the
    HTTP side's keep-alive connections, one per thread) last across rounds, as a trainer's would across
    steps. Each round is (verdicts, seconds, latencies, CPU seconds of this process, of the server
    process, of its event loop)."""
    from scalerl.verifiers import VerifierPool

    runs: dict[str, list] = {"local": [], "remote": []}
    proc, url = start_server(workers)
    try:
        with VerifierPool(config) as pool, ThreadPoolExecutor(concurrency) as ex:
            poster = KeepAlivePoster(url)
            warm(pool.verify_batch, pool.ready, groups)
            warm(lambda batch: httpx.post(url + "/v1/verify", json={"items": batch}, timeout=600),
                 lambda: server_ready(url), groups)
            for _ in range(repeats):
                for key, side in (("local", lambda: time_in_process(pool, groups, ex)),
                                  ("remote", lambda: time_server(poster, groups, ex))):
                    before = cpu_s(proc.pid)
                    result = side()
                    runs[key].append((*result, *(b - a for a, b in zip(before, cpu_s(proc.pid)))))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    return runs


def cpu_line(runs: dict[str, list]) -> str:
    """Median CPU milliseconds per round of the Python processes on each side (round 1, cold, left out)."""
    def ms(key: str, field: int) -> float:
        warm_rounds = runs[key][1:] or runs[key]
        return 1000 * statistics.median(r[field] for r in warm_rounds)

    local, client, server, loop = ms("local", 3), ms("remote", 3), ms("remote", 4), ms("remote", 5)
    return (f"CPU per round, median of warm rounds: in-process {local:.0f} ms (this process); HTTP "
            f"{client + server:.0f} ms = client {client:.0f} ms + server process {server:.0f} ms (event loop "
            f"{loop:.0f} ms); verifier subprocesses not counted")


def profile_round(groups: list[list[dict]], workers: int, concurrency: int) -> str:
    """Two extra, untimed HTTP rounds against a server that profiles its event-loop thread from readiness
    to shutdown (the first round also pays one-off costs: FastAPI builds each route's handler on its
    first request, the verifier caches fill): the event loop (HTTP parsing, body checks, JSON decoding
    and validation, response encoding, the hand-off to and from the scoring threads), i.e. exactly what
    HTTP adds to in-process scoring."""
    import pstats
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "server.prof"
        proc, url = start_server(workers, out)
        try:
            warm(lambda batch: httpx.post(url + "/v1/verify", json={"items": batch}, timeout=600),
                 lambda: server_ready(url), groups)
            with ThreadPoolExecutor(concurrency) as ex:
                poster = KeepAlivePoster(url)
                secs = [time_server(poster, groups, ex)[1] for _ in range(2)]  # the second one warm
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
        if not out.exists():
            return "(no profile written)"
        text = io.StringIO()
        stats = pstats.Stats(str(out), stream=text)
        stats.sort_stats("tottime").print_stats(16)
        body = text.getvalue()
        return (f"server event-loop profile, from readiness through two rounds ({secs[0]:.2f} s, {secs[1]:.2f} s) "
                f"under cProfile (top by own time):\n" + body[body.find("   ncalls"):].rstrip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", type=int, default=100)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--code-tasks", type=int, default=24)
    ap.add_argument("--code-samples", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2, help="math workers and sandbox slots, both sides")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5, help="alternating rounds per side")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-profile", action="store_true", help="skip the extra profiled server round")
    args = ap.parse_args()
    from scalerl.verifiers.verifier_config import CodeConfig, MathConfig, VerifierConfig

    config = VerifierConfig(math=MathConfig(workers=args.workers), code=CodeConfig(slots=args.workers))
    groups = math_groups(args.problems, args.samples, args.seed) + code_groups(args.code_tasks, args.code_samples)
    groups = [groups[i] for i in sorted(range(len(groups)), key=lambda i: (i * 7919) % len(groups))]  # interleave
    n = sum(len(g) for g in groups)
    load_before = os.getloadavg()[0]
    runs = alternate(groups, config, args.workers, args.concurrency, args.repeats)
    load_after = os.getloadavg()[0]
    print(f"workload: {len(groups)} groups, {n} items ({args.problems}x{args.samples} math, "
          f"{args.code_tasks}x{args.code_samples} code); concurrency {args.concurrency}; workers {args.workers}; "
          f"{args.repeats} alternating rounds (median round reported)")
    median = {}
    for key, name in (("local", "in-process verify_batch"), ("remote", "HTTP /v1/verify")):
        _, secs, lat, *_ = sorted(runs[key], key=lambda r: r[1])[len(runs[key]) // 2]
        median[key] = secs
        rounds = " ".join(f"{n / r[1]:.0f}" for r in runs[key])
        print(f"{name:24s} {n / secs:8.1f} items/s (rounds: {rounds})  group latency p50 "
              f"{1000 * statistics.median(lat):7.1f} ms  p99 {1000 * percentile(lat, 0.99):7.1f} ms")
    reference = runs["local"][0][0]
    same = all(r[0] == reference for key in runs for r in runs[key])
    print(f"identical verdicts in every round: {same}")
    print(cpu_line(runs))
    ratio = median["local"] / median["remote"]
    print(f"load average (1 min) {load_before:.2f} at start, {load_after:.2f} at end; host cpus {os.cpu_count()}")
    if not args.no_profile:
        print(profile_round(groups, args.workers, args.concurrency))
    verdict = "PASS" if ratio >= TARGET_RATIO else "FAIL"
    print(f"ratio server/in-process {ratio:.2f} (target >= {TARGET_RATIO}): {verdict}")
    raise SystemExit(0 if ratio >= TARGET_RATIO and same else 1)


if __name__ == "__main__":
    main()
