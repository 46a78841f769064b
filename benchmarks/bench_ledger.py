"""Ledger write throughput and pass-rate lookup latency, against a row-at-a-time INSERT baseline.

    .venv/bin/python benchmarks/bench_ledger.py                     # 1,000,000 rows, 10,000 prompts
    .venv/bin/python benchmarks/bench_ledger.py --rows 100000 --json-out runs/bench_ledger.json

What is measured (one process, one run, so the ratio is immune to how busy the machine is):
- batched: `Ledger.record_attempts` of training-sized Arrow batches (48 prompts × 16 samples = 768 rows,
  one committed transaction each, pass-rate index and retirement maintained) until `--rows` rows;
- record(): the same through `Ledger.record(items, verdicts)` (pydantic objects → Arrow) on a slice;
- baseline: one `INSERT INTO attempts VALUES (...)` per row, each committed on its own (what a naive
  ledger does to acknowledge every sample), on a `--baseline-rows` slice of the same file after the bulk
  phase, i.e. against a table of the same size;
- `scalerl-env ledger ingest` of an `--ingest-lines` verdict JSONL (the lines `scalerl-env verify` writes,
  same training-like batches) into a fresh ledger holding the problems, as a subprocess: interpreter
  start-up, imports, reading, checking and committing included, against the same baseline rows/s;
- lookups at that size: `pass_rates()` for all prompts and for one batch of 48, the `pass_rates` SQL view
  for 48 prompts through `Ledger.query` (wall p50/p95, and the calling thread's CPU p50, which a busy
  machine inflates less), the size of `prompt_stats` it reads, and rebuilding the index when the file
  is opened;
- where one batch's time goes (`--phase-batches` batches into a fresh file): the Python work (Arrow
  conversion and checks; group counts and the `prompt_stats` rows), DuckDB appending the attempts and
  committing with nothing else, and DuckDB appending the attempts and the `prompt_stats` rows as the
  ledger commits them; the bare append's ratio is the ceiling of any ledger that keeps per-prompt rows
  current in the same transaction.
Before each timed write phase (batched, baseline, `ledger ingest`) the page cache is flushed (`os.sync`),
so no phase pays for writing back what the benchmark wrote before it (the 56 MB verdict file it has just
generated, the ledger of the phase before); every phase's own commits are still synced as they go.
Targets: batched and `ledger ingest` ≥ 200× baseline rows/s; pass-rate lookup for 10,000 prompts
p50 < 50 ms; the SQL view for 48 prompts p50 < 5 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
from scalerl.curriculum.ledger.attempts import to_attempts_table
from scalerl.curriculum.ledger.index import NOT_RETIRED, ROW_SCHEMA, rows_table
from scalerl.curriculum.ledger.store import WRITE_SQL, Ledger
from scalerl.env.contracts.records import ProblemRecord, Verdict, VerifyItem

PROMPTS_PER_STEP, GROUP = 48, 16


def make_batches(rows: int, prompts: int, seed: int = 0) -> list[pa.Table]:
    """Training-like batches: each step samples 48 prompts, 16 completions each, pass rate ~ prompt difficulty."""
    rng = np.random.default_rng(seed)
    ids = np.array([f"prompt-{i:06d}" for i in range(prompts)])
    difficulty = rng.beta(0.6, 1.2, prompts)
    batches, step = [], 0
    while sum(b.num_rows for b in batches) < rows:
        n = min(PROMPTS_PER_STEP * GROUP, rows - sum(b.num_rows for b in batches))
        picks = rng.choice(prompts, PROMPTS_PER_STEP, replace=False).repeat(GROUP)[:n]
        correct = rng.random(n) < difficulty[picks]
        batches.append(pa.table({
            "prompt_id": ids[picks], "domain": np.where(picks % 2 == 0, "math", "code"),
            "step": np.full(n, step, np.int64), "policy_version": np.full(n, step, np.int64),
            "sample_index": np.tile(np.arange(GROUP, dtype=np.int32), PROMPTS_PER_STEP)[:n],
            "reward": correct.astype(np.float64), "status": np.where(correct, "correct", "wrong"),
            "truncated": rng.random(n) < 0.02, "completion_tokens": rng.integers(50, 4000, n),
        }))
        step += 1
    return batches


def timed(fn, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _thread_cpu(out: list[float], fn, *args) -> None:
    """Call fn(*args), appending the calling thread's CPU seconds to `out`."""
    t0 = time.thread_time()
    fn(*args)
    out.append(time.thread_time() - t0)


def p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1000.0


def bench(args: argparse.Namespace, workdir: Path) -> dict:
    path = workdir / "bench.duckdb"
    batches = make_batches(args.rows, args.prompts)
    ledger = Ledger(path)
    os.sync()
    t0 = time.perf_counter()
    for b in batches:
        ledger.record_attempts(b)
    batched_s = time.perf_counter() - t0
    res = {"rows": args.rows, "prompts": args.prompts, "batch_rows": PROMPTS_PER_STEP * GROUP,
           "batches": len(batches), "batched_s": batched_s, "batched_rows_per_s": args.rows / batched_s}

    slice_batches = batches[: args.record_batches]
    cols = ("prompt_id", "step", "sample_index", "status")
    as_objects = [([VerifyItem(domain="math", completion="", answer="1", prompt_id=pid, step=s, sample_index=i)
                    for pid, s, i, _ in zip(*(b[c].to_pylist() for c in cols))],
                   [Verdict.of(st) for st in b["status"].to_pylist()]) for b in slice_batches]
    t0 = time.perf_counter()
    for items, verdicts in as_objects:
        ledger.record(items, verdicts)
    n_obj = sum(len(i) for i, _ in as_objects)
    res["record_objects_rows_per_s"] = n_obj / (time.perf_counter() - t0)

    all_ids = list(ledger.pass_rates().keys())
    batch_ids = all_ids[:: max(1, len(all_ids) // PROMPTS_PER_STEP)][:PROMPTS_PER_STEP]
    lat_all = timed(lambda: ledger.pass_rates(all_ids), args.reps)
    lat_batch = timed(lambda: ledger.pass_rates(batch_ids), args.reps)
    view_sql = f"SELECT * FROM pass_rates WHERE prompt_id IN ({', '.join(repr(i) for i in batch_ids)})"
    view_cpu: list[float] = []
    lat_view = timed(lambda: _thread_cpu(view_cpu, ledger.query, view_sql), args.reps)
    (stats_rows,) = ledger.query("SELECT count(*) FROM prompt_stats").rows[0]
    res.update(lookup_prompts=len(all_ids),
               lookup_all_p50_ms=p(lat_all, 50), lookup_all_p95_ms=p(lat_all, 95),
               lookup_batch48_p50_ms=p(lat_batch, 50), sql_view_batch48_p50_ms=p(lat_view, 50),
               sql_view_batch48_p95_ms=p(lat_view, 95), sql_view_batch48_cpu_p50_ms=p(view_cpu, 50),
               prompt_stats_rows=stats_rows)
    ledger.close()
    t0 = time.perf_counter()
    Ledger(path, read_only=True).close()
    res["open_rebuild_index_s"] = time.perf_counter() - t0

    res.update(baseline(path, batches, args.baseline_rows))
    res["speedup"] = res["batched_rows_per_s"] / res["baseline_rows_per_s"]
    res.update(phases(workdir, batches[: args.phase_batches]))
    res["bare_append_speedup"] = (PROMPTS_PER_STEP * GROUP / (res["phase_append_commit_ms"] / 1000.0)
                                  / res["baseline_rows_per_s"])
    if args.ingest_lines:
        res.update(ingest_cli(workdir, args.ingest_lines, args.prompts, args.ingest_module))
        res["ingest_speedup"] = res["ingest_rows_per_s"] / res["baseline_rows_per_s"]
    return res


def phases(workdir: Path, batches: list[pa.Table]) -> dict:
    """ms per batch of each part of a batched write (see the module docstring)."""
    with Ledger(workdir / "phases.duckdb") as led:
        t0 = time.perf_counter()
        tables = [to_attempts_table(b) for b in batches]
        convert_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        stats = [rows_table([s.row(pid) + NOT_RETIRED for pid, s in led._apply(t)[0].items()], ROW_SCHEMA)
                 for t in tables]
        index_s = time.perf_counter() - t0
        con, slots = led._con, led._slots
        timings = {}
        for name, with_stats in (("append_commit", False), ("append_stats_commit", True)):
            os.sync()
            t0 = time.perf_counter()
            for version, (table, stats_rows) in enumerate(zip(tables, stats)):
                slots["_batch"].table, slots["_stats"].table = table, stats_rows
                sql = [WRITE_SQL["_batch"]] + ([WRITE_SQL["_stats"].format(version=version)] if with_stats else [])
                con.execute("; ".join(["BEGIN TRANSACTION", *sql, "COMMIT"]))
            timings[name] = time.perf_counter() - t0
        for slot in slots.values():
            slot.table = slot.schema.empty_table()
    per_batch = {"convert": convert_s, "index": index_s, **timings}
    return {f"phase_{k}_ms": v / len(batches) * 1000.0 for k, v in per_batch.items()}


def ingest_cli(workdir: Path, rows: int, prompts: int, use_module: bool = False) -> dict:
    """Time `scalerl-env ledger ingest` of `rows` verdict lines as a user runs it (a fresh process)."""
    lines = workdir / "verdicts.jsonl"
    with lines.open("w") as f:
        for b in make_batches(rows, prompts, seed=1):
            for k, r in enumerate(b.to_pylist()):
                f.write(json.dumps({"id": f"{r['prompt_id']}-{r['step']}-{k}", "status": r["status"],
                                    "reward": r["reward"], "elapsed_s": 0.0012, "prompt_id": r["prompt_id"],
                                    "details": {"extracted": "42", "method": "boxed", "path": "fast"},
                                    "domain": r["domain"], "step": r["step"], "sample_index": r["sample_index"],
                                    "truncated": r["truncated"], "completion_tokens": r["completion_tokens"]}) + "\n")
    path = workdir / "ingest.duckdb"
    with Ledger(path) as led:
        led.upsert_problems([_problem(i) for i in range(prompts)])
    exe = Path(sys.executable).with_name("scalerl-env")
    cmd = [str(exe)] if exe.exists() and not use_module else [sys.executable, "-m", "scalerl.env.cli"]
    os.sync()
    t0 = time.perf_counter()
    subprocess.run([*cmd, "ledger", "ingest", "--ledger", str(path), "--file", str(lines)], check=True,
                   stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - t0
    return {"ingest_lines": rows, "ingest_bytes": lines.stat().st_size, "ingest_s": elapsed,
            "ingest_rows_per_s": rows / elapsed}


def _problem(i: int) -> ProblemRecord:
    """Prompt i as `make_batches` labels it: even ids math, odd ids code."""
    reference = {"answer": "1"} if i % 2 == 0 else {"tests": {"kind": "assert", "code": "assert True"}}
    return ProblemRecord.model_validate({"prompt_id": f"prompt-{i:06d}", "domain": "code" if i % 2 else "math",
                                         "source": "bench", "prompt": [{"role": "user", "content": "q"}], **reference})


def baseline(path: Path, batches: list[pa.Table], n: int) -> dict:
    rows = [r for b in batches[-3:] for r in b.to_pylist()][:n]
    con = duckdb.connect(str(path))
    cols = list(rows[0].keys())
    sql = f"INSERT INTO attempts ({', '.join(cols)}, correct) VALUES ({', '.join('?' * len(cols))}, ?)"
    os.sync()
    t0 = time.perf_counter()
    for r in rows:  # autocommit: every row is its own committed transaction
        con.execute(sql, [*r.values(), r["status"] == "correct"])
    elapsed = time.perf_counter() - t0
    con.close()
    return {"baseline_rows": len(rows), "baseline_s": elapsed, "baseline_rows_per_s": len(rows) / elapsed}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--prompts", type=int, default=10_000)
    ap.add_argument("--baseline-rows", type=int, default=1_000)
    ap.add_argument("--record-batches", type=int, default=20, help="batches timed through record()")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--phase-batches", type=int, default=300, help="batches timed part by part")
    ap.add_argument("--ingest-lines", type=int, default=200_000, help="lines for the `ledger ingest` run (0: skip)")
    ap.add_argument("--ingest-module", action="store_true",
                    help="run `python -m scalerl.env.cli` (honours PYTHONPATH, e.g. an older checkout) instead of "
                         "the installed scalerl-env")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-ledger-") as tmp:
        res = bench(args, Path(tmp))
    res.update(load_start=load_before, load_end=os.getloadavg()[0], cpus=os.cpu_count())
    print(f"batched ingest : {res['batched_rows_per_s']:>10,.0f} rows/s  ({res['rows']:,} rows in {res['batches']} "
          f"batches of {res['batch_rows']}, {res['batched_s']:.1f} s)")
    print(f"record() path  : {res['record_objects_rows_per_s']:>10,.0f} rows/s  (VerifyItem/Verdict objects)")
    print(f"baseline       : {res['baseline_rows_per_s']:>10,.0f} rows/s  (row-at-a-time INSERT, "
          f"{res['baseline_rows']} rows)")
    print(f"speedup        : {res['speedup']:>10.1f}x  (target >= 200x)")
    print(f"one batch, ms  : Arrow conversion and checks {res['phase_convert_ms']:.2f}, group counts and stats rows "
          f"{res['phase_index_ms']:.2f}; DuckDB append + commit {res['phase_append_commit_ms']:.2f} "
          f"(alone = {res['bare_append_speedup']:.0f}x baseline), append + prompt_stats + commit "
          f"{res['phase_append_stats_commit_ms']:.2f}")
    if "ingest_s" in res:
        print(f"ledger ingest  : {res['ingest_rows_per_s']:>10,.0f} rows/s  ({res['ingest_lines']:,} lines, "
              f"{res['ingest_bytes'] / 1e6:.0f} MB, {res['ingest_s']:.2f} s as a fresh process) = "
              f"{res['ingest_speedup']:.1f}x baseline (target >= 200x)")
    print(f"pass_rates() all {res['lookup_prompts']:,} prompts: p50 {res['lookup_all_p50_ms']:.1f} ms, "
          f"p95 {res['lookup_all_p95_ms']:.1f} ms (target p50 < 50 ms)")
    print(f"pass_rates() 48 prompts: p50 {res['lookup_batch48_p50_ms']:.3f} ms; open + index rebuild "
          f"{res['open_rebuild_index_s']:.2f} s")
    print(f"SQL view 48 prompts: p50 {res['sql_view_batch48_p50_ms']:.1f} ms, p95 "
          f"{res['sql_view_batch48_p95_ms']:.1f} ms, thread CPU p50 {res['sql_view_batch48_cpu_p50_ms']:.1f} ms "
          f"(target p50 < 5 ms); prompt_stats {res['prompt_stats_rows']:,} rows for {res['lookup_prompts']:,} prompts")
    print(f"load average (1 min) {res['load_start']:.2f} at start, {res['load_end']:.2f} at end; "
          f"host cpus {res['cpus']}")
    print(json.dumps(res))
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(res, indent=2))
    ok = (res["speedup"] >= 200 and res.get("ingest_speedup", 200) >= 200 and res["lookup_all_p50_ms"] < 50
          and res["sql_view_batch48_p50_ms"] < 5)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
