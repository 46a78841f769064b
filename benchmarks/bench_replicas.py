"""CPU time per verdict with verifier replicas and one ledger owner, and the owner's ingest ceiling.

    .venv/bin/python benchmarks/bench_replicas.py                  # 3 rounds, 2,400 math items per run
    .venv/bin/python benchmarks/bench_replicas.py --items 4800 --rounds 3 --json-out runs/bench_replicas.json

What is measured (real `scalerl-env serve` processes on loopback, `--workers 1` each, a real DuckDB
ledger; every item carries a prompt_id, so every verdict is recorded):
- CPU per verdict: the user + system CPU of every server process and its verifier workers (psutil,
  read before and after the timed load, the client's own CPU left out) divided by the verdicts, for
  - one process with `--ledger` (today's single-machine mode: the baseline, ratio 1.00),
  - 1 replica `--ledger-owner` + the owner, and 3 replicas + the owner;
  the client (`RewardClient` over the replicas' URLs, 8 threads, 32-item batches, an Idempotency-Key on
  each) sends the same items to every configuration. On a 2-core machine this is the cost of the
  extra hop (forwarding, the owner's ingest route), not a speed-up: three replicas share two cores.
- The owner's ingest ceiling: 4 threads posting `POST /v1/ledger/ingest` batches of `--ingest-rows`
  fresh rows straight to an owner, rows committed per second of wall time, and its CPU per row.
- Wire format of the forwarded rows: JSON (pydantic encode on the replica, one-pass validation on the
  owner, what the link sends) against Arrow IPC (columns built from the same rows, written and read),
  CPU per row in this process.
Configurations alternate within each round; medians over `--rounds`, `uptime` load beside each figure.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scalerl.env.client import RewardClient
from scalerl.env.contracts.records import Verdict, VerifyItem
from scalerl.env.server.models import LedgerIngestRequest
from scalerl.env.server.owner_link import ingest_rows

from tests.support.server_harness import ServerProcess

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_math import process_cpu_s  # one reading of a process's CPU for both benchmarks

WORKERS = ("--workers", "1")


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def math_items(n: int, tag: str, workload: str = "fast") -> list[dict]:
    """Every (completion, answer) distinct, so no verifier cache answers for another item; 1 in 3 correct.
    `fast`: the answer is the boxed text (the verifier's fast path, ~40 µs); `verify`: a square against
    its expansion, decided by math_verify (parsing and comparing with sympy: milliseconds)."""
    out = []
    for i in range(n):
        if workload == "fast":
            completion, answer = f"\\boxed{{\\frac{{{i}}}{{7}}}}", f"{i}/7" if i % 3 == 0 else f"{i + 1}/7"
        else:
            completion, answer = f"\\boxed{{(x+{i})^2}}", f"x^2+{2 * i}x+{i * i if i % 3 == 0 else i * i + 1}"
        out.append({"id": f"{tag}-{i}", "domain": "math", "completion": f"so the answer is {completion}",
                    "answer": answer, "prompt_id": f"p{i % 150}", "step": i // 150})
    return out


def cpu_s(servers: list[ServerProcess]) -> float:
    """CPU seconds so far of every server process and its children (the verifier workers)."""
    roots = [psutil.Process(server.proc.pid) for server in servers]
    return sum(process_cpu_s(p) for root in roots for p in [root, *root.children(recursive=True)])


def start(mode: str, tmp: Path) -> tuple[list[ServerProcess], list[str]]:
    ledger = str(tmp / f"{uuid.uuid4().hex}.duckdb")
    owner = ServerProcess("--ledger", ledger, *WORKERS).start()
    if mode == "single":
        return [owner], [owner.url]
    replicas = [ServerProcess("--ledger-owner", owner.url, *WORKERS).start() for _ in range(int(mode[0]))]
    return [owner, *replicas], [r.url for r in replicas]


def run_scoring(mode: str, tmp: Path, n_items: int, round_: int, workload: str) -> dict:
    servers, urls = start(mode, tmp)
    try:
        items = math_items(n_items, f"{mode}-{round_}", workload)
        chunks = [items[i::8] for i in range(8)]
        with RewardClient(urls, batch_size=32, concurrency=8, timeout_s=120) as client:
            client.verify(math_items(64, "warm"))
            before_load, before = load(), cpu_s(servers)
            start_wall = time.perf_counter()
            threads = [threading.Thread(target=client.verify, args=(chunk,)) for chunk in chunks]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - start_wall
            used = cpu_s(servers) - before
            [[recorded]] = client.ledger_query("SELECT count(*) FROM attempts").rows
            forwards = sum(_metric(url, "scalerl_owner_forwards_total") for url in urls) if mode != "single" else None
    finally:
        for server in servers:
            server.stop()
    if recorded != n_items + 64:
        raise RuntimeError(f"{mode}: {recorded} rows recorded for {n_items + 64} verdicts")
    # single: one ledger transaction per 32-item request; replicas: one per forward (rows coalesced)
    return {"cpu_ms_per_verdict": used / n_items * 1e3, "items_per_s": n_items / wall, "load": before_load,
            "requests": (n_items + 31) // 32 + 2, "owner_transactions": forwards}


def _metric(url: str, name: str) -> float:
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def ingest_body(rows: int) -> bytes:
    key = uuid.uuid4().hex
    items = [VerifyItem(id=f"i{i}", domain="math", completion="", answer="1", prompt_id=f"p{i % 150}", step=1)
             for i in range(rows)]
    verdicts = [Verdict.of("correct", details={"rule": "math_verify"}, elapsed_s=0.001, id=f"i{i}")
                for i in range(rows)]
    request = LedgerIngestRequest.model_construct(rows=ingest_rows(key, items, verdicts, range(rows)))
    return request.model_dump_json().encode()


def run_ingest(tmp: Path, rows: int, batches: int) -> dict:
    owner = ServerProcess("--ledger", str(tmp / f"{uuid.uuid4().hex}.duckdb"), *WORKERS).start()
    try:
        bodies = [ingest_body(rows) for _ in range(batches)]
        shares = [bodies[i::4] for i in range(4)]

        def post(share: list[bytes]) -> None:
            with httpx.Client(timeout=120) as http:
                for body in share:
                    r = http.post(owner.url + "/v1/ledger/ingest", content=body,
                                  headers={"content-type": "application/json"})
                    r.raise_for_status()

        before_load, before = load(), cpu_s([owner])
        start_wall = time.perf_counter()
        threads = [threading.Thread(target=post, args=(share,)) for share in shares]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start_wall
        used = cpu_s([owner]) - before
    finally:
        owner.stop()
    return {"rows_per_s": rows * batches / wall, "cpu_us_per_row": used / (rows * batches) * 1e6, "load": before_load}


def wire_formats(rows: int = 1024, repeats: int = 20) -> dict:
    """CPU µs per row: JSON as the link sends it vs Arrow IPC of the same rows."""
    import pyarrow as pa
    from scalerl.curriculum.ledger.attempts import rows_from_verdicts

    body = ingest_body(rows)
    parsed = LedgerIngestRequest.model_validate_json(body)

    def as_json() -> None:
        LedgerIngestRequest.model_validate_json(LedgerIngestRequest.model_construct(rows=parsed.rows).model_dump_json())

    def as_arrow() -> None:
        cols = rows_from_verdicts([r.item for r in parsed.rows], [r.verdict for r in parsed.rows], step=None,
                                  policy_version=None)
        cols["key"] = [r.key for r in parsed.rows]
        cols["index"] = [r.index for r in parsed.rows]
        cols["verdict"] = [r.verdict.model_dump_json() for r in parsed.rows]
        sink = io.BytesIO()
        table = pa.table(cols)
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        pa.ipc.open_stream(sink.getvalue()).read_all()

    out = {}
    for name, fn in (("json", as_json), ("arrow", as_arrow)):
        times = []
        for _ in range(repeats):
            t0 = time.process_time()
            fn()
            times.append((time.process_time() - t0) / rows * 1e6)
        out[f"{name}_us_per_row"] = statistics.median(times)
    out["json_bytes_per_row"] = len(body) / rows
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=2400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ingest-rows", type=int, default=1024)
    parser.add_argument("--ingest-batches", type=int, default=40)
    parser.add_argument("--workload", choices=["fast", "verify"], default="fast", help="see math_items")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-replicas-{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    modes = ["single", "1-replica", "3-replicas"]
    runs: dict[str, list[dict]] = {m: [] for m in [*modes, "ingest"]}
    for r in range(args.rounds):
        for mode in modes:
            runs[mode].append(run_scoring(mode, tmp, args.items, r, args.workload))
            print(f"round {r} {mode}: {runs[mode][-1]}", flush=True)
        runs["ingest"].append(run_ingest(tmp, args.ingest_rows, args.ingest_batches))
        print(f"round {r} ingest: {runs['ingest'][-1]}", flush=True)
    base = statistics.median(x["cpu_ms_per_verdict"] for x in runs["single"])
    summary = {}
    for mode in modes:
        med = statistics.median(x["cpu_ms_per_verdict"] for x in runs[mode])
        summary[mode] = {"cpu_ms_per_verdict": med, "ratio_to_single": med / base,
                         "items_per_s": statistics.median(x["items_per_s"] for x in runs[mode]),
                         "loads": [x["load"] for x in runs[mode]]}
    summary["ingest"] = {k: statistics.median(x[k] for x in runs["ingest"]) for k in ("rows_per_s", "cpu_us_per_row")}
    summary["ingest"]["loads"] = [x["load"] for x in runs["ingest"]]
    summary["wire"] = wire_formats()
    print(json.dumps(summary, indent=2))
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps({"summary": summary, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
