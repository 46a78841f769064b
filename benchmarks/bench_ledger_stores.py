"""Multi-writer stores weighed against the one-owner DuckDB ledger, on the reward service's write workload.

    .venv/bin/python benchmarks/bench_ledger_stores.py                       # DuckDB owner only
    PG_DSN=postgresql://postgres@127.0.0.1:55432/postgres \
        python benchmarks/bench_ledger_stores.py --postgres                  # with psycopg (not a dependency)

Workload (the same for every store): `--batches` batches of verdict rows (16 prompts x 16 samples = 256
rows, the size a replica's forwarder sends), each committed in one transaction together with the
per-prompt counters the pass-rate reads use and one idempotency row per verdict; then the pass-rate
lookup of one batch's prompts and the "hardest active prompts" SQL of docs/ledger.md, each p50 of 50.
- duckdb-owner: `scalerl.curriculum.ledger.store.Ledger.record_once(rows, keys)`, in process (what the owner
  runs for each ingest request; the HTTP hop is measured by benchmarks/bench_replicas.py); and
  `record_attempts` without keys, to show what the idempotency table costs.
- postgres, 1 and 3 writers: COPY into a temporary table, then in the same transaction INSERT the
  attempts, upsert `prompt_stats` (ON CONFLICT DO UPDATE adding the counters) and insert the
  idempotency rows (primary key), synchronous_commit on: the design a Postgres-backed ledger would use.
Each configuration runs `--repeats` times (median reported) with the load average printed beside it.
DuckLake is not measured: `INSTALL ducklake` needs extensions.duckdb.org, unreachable here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
from scalerl.curriculum.ledger.store import Ledger

PROMPTS, GROUP = 16, 16
HARDEST = ("SELECT prompt_id, scored, correct, correct::FLOAT8 / NULLIF(scored, 0) AS pass_rate FROM prompt_stats "
           "WHERE scored >= 16 ORDER BY pass_rate, scored DESC LIMIT 20")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def make_batch(rng: np.random.Generator, step: int, n_prompts: int = 2000) -> pa.Table:
    ids = rng.choice(n_prompts, PROMPTS, replace=False)
    prompt_id = np.repeat([f"p{i:05d}" for i in ids], GROUP)
    correct = rng.random(PROMPTS * GROUP) < 0.4
    return pa.table({
        "prompt_id": prompt_id, "domain": ["math"] * len(prompt_id), "step": [step] * len(prompt_id),
        "sample_index": np.tile(np.arange(GROUP, dtype=np.int32), PROMPTS),
        "status": np.where(correct, "correct", "wrong"), "reward": correct.astype(float),
        "elapsed_s": [0.01] * len(prompt_id),
    })


def keys_for(table: pa.Table) -> list[tuple[str, int, str]]:
    key = uuid.uuid4().hex
    return [(key, i, '{"status": "correct", "reward": 1.0}') for i in range(table.num_rows)]


def run_duckdb(batches: list[pa.Table], keyed: bool = True) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(Path(tmp) / "l.duckdb")
        start = time.perf_counter()
        for table in batches:
            if keyed:
                ledger.record_once(table, keys_for(table))
            else:
                ledger.record_attempts(table)
        write_s = time.perf_counter() - start
        ids = list(dict.fromkeys(batches[-1]["prompt_id"].to_pylist()))
        lookup = _p50(lambda: ledger.pass_rates(ids))
        sql = _p50(lambda: ledger.query(HARDEST.replace("prompt_stats", "pass_rates")))
        ledger.close()
    rows = sum(t.num_rows for t in batches)
    return {"rows_per_s": rows / write_s, "lookup_ms": lookup, "hardest_sql_ms": sql}


PG_DDL = """
DROP TABLE IF EXISTS attempts, prompt_stats, idempotency;
CREATE TABLE attempts (prompt_id TEXT NOT NULL, domain TEXT NOT NULL, step BIGINT, sample_index INT,
    reward DOUBLE PRECISION NOT NULL, status TEXT NOT NULL, correct BOOLEAN NOT NULL, elapsed_s DOUBLE PRECISION,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now());
CREATE TABLE prompt_stats (prompt_id TEXT PRIMARY KEY, domain TEXT NOT NULL, attempts BIGINT NOT NULL,
    scored BIGINT NOT NULL, correct BIGINT NOT NULL, reward_sum DOUBLE PRECISION NOT NULL, last_step BIGINT);
CREATE TABLE idempotency (key TEXT NOT NULL, item_index INT NOT NULL, verdict TEXT NOT NULL,
    PRIMARY KEY (key, item_index));
"""
PG_BATCH = """
INSERT INTO idempotency SELECT key, item_index, verdict FROM _keys ON CONFLICT DO NOTHING;
INSERT INTO attempts (prompt_id, domain, step, sample_index, reward, status, correct, elapsed_s)
    SELECT prompt_id, domain, step, sample_index, reward, status, status = 'correct', elapsed_s FROM _b;
INSERT INTO prompt_stats SELECT prompt_id, min(domain), count(*), count(*) FILTER (WHERE status <> 'error'),
    count(*) FILTER (WHERE status = 'correct'), sum(reward), max(step) FROM _b GROUP BY prompt_id
ON CONFLICT (prompt_id) DO UPDATE SET attempts = prompt_stats.attempts + excluded.attempts,
    scored = prompt_stats.scored + excluded.scored, correct = prompt_stats.correct + excluded.correct,
    reward_sum = prompt_stats.reward_sum + excluded.reward_sum,
    last_step = greatest(prompt_stats.last_step, excluded.last_step);
"""


def _pg_writer(dsn: str, batches: list[pa.Table]) -> None:
    import psycopg

    with psycopg.connect(dsn) as con:
        con.execute("CREATE TEMP TABLE _b (prompt_id TEXT, domain TEXT, step BIGINT, sample_index INT, "
                    "reward DOUBLE PRECISION, status TEXT, elapsed_s DOUBLE PRECISION) ON COMMIT DELETE ROWS")
        con.execute("CREATE TEMP TABLE _keys (key TEXT, item_index INT, verdict TEXT) ON COMMIT DELETE ROWS")
        con.commit()
        cols = ["prompt_id", "domain", "step", "sample_index", "reward", "status", "elapsed_s"]
        for table in batches:
            with con.transaction(), con.cursor() as cur:
                with cur.copy(f"COPY _b ({', '.join(cols)}) FROM STDIN") as copy:
                    for row in zip(*(table[c].to_pylist() for c in cols)):
                        copy.write_row(row)
                with cur.copy("COPY _keys FROM STDIN") as copy:
                    for row in keys_for(table):
                        copy.write_row(row)
                cur.execute(PG_BATCH)


def run_postgres(dsn: str, batches: list[pa.Table], writers: int) -> dict[str, float]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute(PG_DDL)
    shares = [batches[i::writers] for i in range(writers)]
    threads = [threading.Thread(target=_pg_writer, args=(dsn, share)) for share in shares]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    write_s = time.perf_counter() - start
    ids = list(dict.fromkeys(batches[-1]["prompt_id"].to_pylist()))
    with psycopg.connect(dsn, autocommit=True) as con:
        lookup = _p50(lambda: con.execute("SELECT * FROM prompt_stats WHERE prompt_id = ANY(%s)", [ids]).fetchall())
        sql = _p50(lambda: con.execute(HARDEST).fetchall())
    return {"rows_per_s": sum(t.num_rows for t in batches) / write_s, "lookup_ms": lookup, "hardest_sql_ms": sql}


def _p50(fn, n: int = 50) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--postgres", action="store_true", help="also Postgres at $PG_DSN (needs psycopg)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    batches = [make_batch(rng, step) for step in range(args.batches)]
    configs = {"duckdb-owner (in process)": lambda: run_duckdb(batches),
               "duckdb-owner, no idempotency keys": lambda: run_duckdb(batches, keyed=False)}
    if args.postgres:
        dsn = os.environ.get("PG_DSN", "postgresql://postgres@127.0.0.1:55432/postgres")
        configs["postgres, 1 writer"] = lambda: run_postgres(dsn, batches, 1)
        configs["postgres, 3 writers"] = lambda: run_postgres(dsn, batches, 3)
    print(f"{args.batches} batches x {PROMPTS * GROUP} rows; median of {args.repeats}")
    for name, fn in configs.items():
        runs = []
        for _ in range(args.repeats):
            before = load()
            runs.append(fn())
            print(f"  {name}: {runs[-1]['rows_per_s']:,.0f} rows/s (load {before})", flush=True)
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{name}: {med['rows_per_s']:,.0f} rows/s, lookup of {PROMPTS} prompts p50 {med['lookup_ms']:.2f} ms, "
              f"hardest-prompts SQL p50 {med['hardest_sql_ms']:.2f} ms (load after {load()})")


if __name__ == "__main__":
    main()
