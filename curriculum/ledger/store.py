"""The DuckDB pass-rate ledger: one owning process appends scored samples; anyone may read.

Guarantees
- Acknowledged = committed: `record`/`record_attempts` return after one DuckDB transaction (the Arrow
  batch appended to `attempts` and the new `prompt_stats` rows of the prompts it touched, which carry
  any retirements it caused) has committed to the write-ahead log. A `kill -9` after the return loses nothing;
  a crash during the call loses that whole batch only, and the file reopens (DuckDB replays its WAL).
- Writes are batched: one `INSERT ... SELECT` from Arrow per table per call, all sent in one call to
  DuckDB, never a row-at-a-time loop.
- Thread-safe: writers are serialised by a lock; `query` and the lookups run concurrently with them
  (each query on its own DuckDB cursor, MVCC snapshot isolation).
- SQL from outside (`query`) must be one SELECT statement; it runs with a time limit (interrupted on
  expiry) and with file-system access disabled (no `read_csv('/etc/passwd')` through the server).
- Retirement is decided by `scalerl.curriculum.ledger.retirement.passes` on each batch as it is recorded and is
permanent.

Not guaranteed
- One writer process per file (DuckDB's own file lock enforces it: a second read-write open fails, and
  read-only opens fail while the owner runs; read through the owner's `/v1/ledger/query` or snapshots).
- `record`/`record_attempts` do not deduplicate: every call is new samples (duplicate *files* are refused
  by `ingest`); `record_once` records each (idempotency key, item index) once (`scalerl.curriculum.ledger.idempotency`).
- `record` accepts prompt_ids that are not in `problems` (the reward server scores prompts from any
  trainer); `scalerl.curriculum.ledger.ingest` refuses them unless told otherwise.

The owner keeps an in-memory index of the `pass_rates` view (read from the latest `prompt_stats` rows at
open, then updated after each commit, one immutable `PassRate` per prompt), so `pass_rates()` and
`retired_ids()` are dict lookups that never scan `attempts`; the same counters are what each commit
writes to `prompt_stats`, so the view and the index agree (tested).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from scalerl.curriculum.ledger.attempts import ATTEMPT_SCHEMA, rows_from_verdicts, to_attempts_table
from scalerl.curriculum.ledger.deadlines import Deadlines
from scalerl.curriculum.ledger.idempotency import KEY_SCHEMA, claim, key_table
from scalerl.curriculum.ledger.index import (
    NOT_RETIRED,
    ROW_SCHEMA,
    STATS_COLUMNS,
    Retirement,
    Stats,
    group_counts,
    rows_table,
)
from scalerl.curriculum.ledger.ledger_config import LedgerConfig
from scalerl.curriculum.ledger.models import LedgerError, PassRate, QueryResult, QueryTimeoutError, ReadOnlyQueryError
from scalerl.curriculum.ledger.retirement import RetirementConfig, passes
from scalerl.curriculum.ledger.schema import LATEST_STATS, NO_STEP, check_readable, create_or_migrate
from scalerl.env.contracts.records import ProblemRecord, Verdict, VerifyItem

logger = logging.getLogger(__name__)

INDEX_SQL = f"SELECT {', '.join(ROW_SCHEMA.names)} FROM ({LATEST_STATS})"
# prompt_stats keeps superseded rows until they outnumber this (or an eighth of the prompts): then the
# commit that crosses it deletes them, so a batch pays one small append and readers scan few extra rows
# (a lookup of 48 prompts took 2.7 ms of CPU on a compact table, 4.3 ms with 40 % superseded rows, load 6).
STATS_SLACK_MIN = 1024
STATS_SLACK_FRACTION = 8
# What one commit runs, in one call (each statement reads its rows from a slot; see _Slot).
WRITE_SQL = {
    "_batch": f"INSERT INTO attempts ({', '.join(ATTEMPT_SCHEMA.names)}) SELECT * FROM _batch",
    "_stats": f"INSERT INTO prompt_stats ({', '.join(ROW_SCHEMA.names)}, version, last_seen_at) "
              "SELECT *, {version}, now() FROM _stats",  # now(): the transaction's start, as created_at
}
COMPACT_SQL = ("DELETE FROM prompt_stats WHERE rowid NOT IN "
               "(SELECT arg_max(rowid, version) FROM prompt_stats GROUP BY prompt_id)")


class _Slot:
    """An Arrow stream whose rows the writer sets before the statement that reads it. Registered once on
    the owner's connection (cursors never see it): registering a table per batch is a catalog change each
    time and costs more than inserting a training batch's rows."""

    def __init__(self, schema: pa.Schema):
        self.schema, self.table = schema, schema.empty_table()

    def __arrow_c_schema__(self) -> object:
        return self.schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.table.__arrow_c_stream__(requested_schema)


# DuckDB hands a second connect() to a file this process already holds the same database instance, so
# two Ledger writers in one process would each keep their own index; refuse the second one instead.
_OWNED: set[str] = set()
_OWNED_LOCK = threading.Lock()
_DEADLINES = Deadlines()  # one watchdog thread (started by the first query) for every ledger's queries


# The owner's DuckDB runs one thread unless told otherwise: its statements are small (a training batch,
# a batch's lookup) and a second thread only adds a hand-off to each, ~0.4 ms of a ~1 ms INSERT (a
# 768-row batch went from 7.6 to 6.5 ms of CPU, 2 cores). Read-only opens keep DuckDB's default (every
# core) for analysis; so does a Parquet snapshot.
OWNER_THREADS = 1


def _connect(path: Path, read_only: bool, threads: int | None) -> duckdb.DuckDBPyConnection:
    if read_only and not path.exists():
        raise LedgerError(f"ledger {path} does not exist")
    key = str(path.resolve())
    with _OWNED_LOCK:
        if key in _OWNED:
            raise LedgerError(f"ledger {path} is already open in this process; share that Ledger object")
        try:
            config: dict[str, Any] = {"enable_external_access": False}
            if threads is not None or not read_only:
                config["threads"] = threads or OWNER_THREADS
            con = duckdb.connect(str(path), read_only=read_only, config=config)
        except duckdb.ConnectionException as exc:
            raise LedgerError(f"ledger {path} is already open in this process ({exc})") from exc
        except duckdb.IOException as exc:
            raise _lock_error(path, exc) from exc
        if not read_only:
            _OWNED.add(key)
        return con


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    try:
        con.execute("ROLLBACK")
    except duckdb.TransactionException:  # a failed COMMIT has already rolled back
        pass


def _lock_error(path: Path, exc: Exception) -> LedgerError:
    if "lock" in str(exc).lower():
        return LedgerError(
            f"ledger {path} is held by another process ({exc}). Only one process may own it: query the "
            "owner with `scalerl-env ledger query --url http://HOST:PORT`, or read a Parquet snapshot."
        )
    return LedgerError(f"cannot open ledger {path}: {exc}")


def _release(path: Path) -> None:
    with _OWNED_LOCK:
        _OWNED.discard(str(path.resolve()))


def check_read_only(sql: str) -> str:
    """The single SELECT statement in `sql`, or ReadOnlyQueryError."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise ReadOnlyQueryError(f"SQL does not parse: {exc}") from exc
    if len(statements) != 1:
        raise ReadOnlyQueryError(f"send exactly one statement (got {len(statements)})")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise ReadOnlyQueryError(f"only read statements (SELECT / WITH ... SELECT) are accepted, got {kind.name}")
    return statements[0].query


def run_query(con: duckdb.DuckDBPyConnection, sql: str, *, timeout_s: float, max_rows: int) -> QueryResult:
    """Run the single read-only statement `sql` (see `check_read_only`) on `con`, stopped after `timeout_s`."""
    statement = check_read_only(sql)
    deadline = _DEADLINES.arm(timeout_s, con.interrupt)
    try:
        con.execute(statement)
        columns = [d[0] for d in con.description or []]
        rows = con.fetchmany(max_rows + 1)
    except duckdb.InterruptException as exc:
        raise QueryTimeoutError(f"query ran past its time limit of {timeout_s} s and was stopped") from exc
    except duckdb.Error as exc:
        raise LedgerError(f"query failed: {exc}") from exc
    finally:
        _DEADLINES.disarm(deadline)
    return QueryResult(columns=columns, rows=[list(r) for r in rows[:max_rows]], truncated=len(rows) > max_rows)


class Ledger:
    """The pass-rate ledger in one DuckDB file. See the module docstring for what is guaranteed."""

    def __init__(self, path: str | Path, *, read_only: bool = False, retirement: RetirementConfig | None = None,
                 threads: int | None = None, config: LedgerConfig | None = None):
        """`threads`: DuckDB threads of this file's database in this process (default: `OWNER_THREADS` for
        the owner, every core for a read-only open). `config`: what is kept beyond the verdict."""
        self.path = Path(path)
        self.read_only = read_only
        self.retirement = retirement or RetirementConfig()
        self.config = config or LedgerConfig()
        self._write_lock = threading.RLock()
        self._index_lock = threading.Lock()
        self._con = _connect(self.path, read_only, threads)
        try:
            if read_only:
                check_readable(self._con, str(self.path))
                self.migrated_from = None
            else:
                self.migrated_from = create_or_migrate(self._con, str(self.path))
            self._load_index()
            self._slots = {} if read_only else {name: _Slot(schema) for name, schema in (
                ("_batch", ATTEMPT_SCHEMA), ("_stats", ROW_SCHEMA))}
            for name, slot in self._slots.items():
                self._con.register(name, slot)
            self._key_slot = _Slot(KEY_SCHEMA)
            if not read_only:
                self._con.register("_keys", self._key_slot)
        except Exception:
            self._con.close()
            if not read_only:
                _release(self.path)
            raise
        self._closed = False
        if not read_only:
            self._reconcile_retirements()

    # ------------------------------------------------------------------------------------------ index
    def _load_index(self) -> None:
        latest = self._con.execute(INDEX_SQL).fetchall()
        counters = len(STATS_COLUMNS)
        epochs = self._con.execute("SELECT domain, max(epoch) FROM epochs GROUP BY domain").fetchall()
        [(rows, version)] = self._con.execute("SELECT count(*), coalesce(max(version), 0) FROM prompt_stats").fetchall()
        self._stats = stats = {row[0]: Stats(*row[1:counters]) for row in latest}
        self._stats_rows, self._stats_version = int(rows), int(version)
        self._retired: dict[str, Retirement] = {row[0]: Retirement(*row[counters:]) for row in latest
                                                if row[counters] is not None}
        self._next_seq = max((r.seq for r in self._retired.values()), default=0) + 1
        self._epochs: dict[str, int] = {d: int(e) for d, e in epochs}
        self._rates = {pid: self._pass_rate(pid, st) for pid, st in stats.items()}

    def _reconcile_retirements(self) -> None:
        """Retire prompts whose current window already passes (after a migration or a config change)."""
        window = self.retirement.window
        due = {pid: s for pid, s in self._stats.items()
               if pid not in self._retired and passes(*s.window(window), self.retirement)}
        if due:
            with self._write_lock:
                retire = [(pid, s.domain, None if s.gstep == NO_STEP else s.gstep, *s.window(window))
                          for pid, s in due.items()]
                self._commit(None, self._retirements(retire), due)  # new rows carrying the retirements
            logger.info("retired %d prompt(s) whose pass-rate window already met the rule", len(due))

    # ------------------------------------------------------------------------------------------ writes
    def record(
        self, items: Sequence[VerifyItem], verdicts: Sequence[Verdict], *, step: int | None = None,
        policy_version: int | None = None,
    ) -> int:
        """Append the scored items that carry a prompt_id; returns the number of rows committed."""
        cols = rows_from_verdicts(items, verdicts, step=step, policy_version=policy_version)
        if not cols["prompt_id"]:
            return 0
        return self.record_attempts(cols)

    def record_attempts(
        self, rows: pa.Table | Sequence[Mapping[str, Any]] | Mapping[str, list[Any]], *,
        ingest: tuple[str, str] | None = None,
    ) -> int:
        """Append attempt rows (Arrow table, list of dicts or dict of columns) in one transaction.
        `ingest=(sha256, path)` also records the source file, in the same transaction."""
        self._check_writable()
        table = to_attempts_table(rows, keep_completions=self.config.store_completions)
        if table.num_rows == 0 and ingest is None:
            return 0
        with self._write_lock:
            updated, retire = self._apply(table)
            self._commit(table, self._retirements(retire), updated, ingest=ingest)
        return table.num_rows

    def record_once(self, rows: pa.Table | Sequence[Mapping[str, Any]] | Mapping[str, list[Any]],
                    keys: Sequence[tuple[str, int, str]]) -> dict[int, str]:
        """Append the rows whose (idempotency key, item index) this ledger has not recorded, claiming those
        pairs in the same transaction. `keys[i]` = (key, item index, verdict JSON) of row i. Returns, for
        every row not appended (recorded before, or repeated in this batch), the verdict JSON recorded first."""
        self._check_writable()
        table = to_attempts_table(rows, keep_completions=self.config.store_completions)
        if table.num_rows == 0:
            return {}
        keyed = key_table(keys, table["prompt_id"].to_pylist())
        with self._write_lock:
            self._con.execute("BEGIN TRANSACTION")
            try:
                fresh, replayed = claim(self._con, self._key_slot, keyed)
                if len(fresh) < table.num_rows:
                    table = table.take(pa.array(fresh, pa.int64()))
                updated, retire = self._apply(table)
            except Exception:
                _rollback(self._con)
                raise
            self._commit(table, self._retirements(retire), updated, begun=True)
        return replayed

    def _apply(self, table: pa.Table) -> tuple[dict[str, Stats], list[tuple]]:
        """New counters for the prompts in `table` and the retirements they cause (not yet applied)."""
        groups, domains = group_counts(table)
        updated: dict[str, Stats] = {}
        retire: list[tuple] = []  # (prompt_id, domain, step, window correct, window scored) at decision time
        retiring: set[str] = set()
        window = self.retirement.window
        for g in groups:  # by step, then first appearance: the order a trainer would have recorded them
            s = updated.get(g.prompt_id)
            if s is None:
                old = self._stats.get(g.prompt_id)
                s = updated[g.prompt_id] = old.copy() if old is not None else Stats(domains[g.prompt_id])
            s.add_group(g)
            if (g.prompt_id not in self._retired and g.prompt_id not in retiring
                    and passes(*s.window(window), self.retirement)):
                retire.append((g.prompt_id, s.domain, None if g.gstep == NO_STEP else g.gstep, *s.window(window)))
                retiring.add(g.prompt_id)
        return updated, retire

    def _retirements(self, retire: list[tuple]) -> dict[str, Retirement]:
        """The decided retirements, numbered in decision order after those already committed."""
        now = datetime.now(timezone.utc)
        return {pid: Retirement(self._next_seq + offset, step, self._epochs.get(domain), correct / scored, scored,
                                self.retirement.threshold, now)
                for offset, (pid, domain, step, correct, scored) in enumerate(retire)}

    def _commit(self, table: pa.Table | None, retirements: dict[str, Retirement], updated: dict[str, Stats], *,
                ingest: tuple[str, str] | None = None, begun: bool = False) -> None:
        """One transaction: the attempts and the touched prompts' new prompt_stats rows, which carry the
        retirements (every retiring prompt is in `updated`). `begun`: the caller opened it (and wrote in it)."""
        con, slots = self._con, self._slots
        compact = self._compaction_due(updated)
        statements = [] if begun else ["BEGIN TRANSACTION"]
        if table is not None and table.num_rows:
            slots["_batch"].table = table
        if updated:
            retired = self._retired
            slots["_stats"].table = rows_table([s.row(pid) + (retirements.get(pid) or retired.get(pid) or NOT_RETIRED)
                                                for pid, s in updated.items()], ROW_SCHEMA)
        statements += [WRITE_SQL[name].format(version=self._stats_version + 1) for name, slot in slots.items()
                       if slot.table.num_rows]
        if compact:
            statements.append(COMPACT_SQL)
        if ingest is None:
            statements.append("COMMIT")
        try:
            con.execute("; ".join(statements))  # one call: each execute() costs more than a small insert
            if ingest is not None:
                con.execute("INSERT INTO ingests (sha256, path, rows) VALUES (?, ?, ?)",
                            [ingest[0], ingest[1], 0 if table is None else table.num_rows])
                con.execute("COMMIT")
        except Exception as exc:
            _rollback(con)
            raise LedgerError(f"write to {self.path} failed and was rolled back: {exc}") from exc
        finally:
            for slot in slots.values():
                slot.table = slot.schema.empty_table()
        with self._index_lock:  # only after the commit: the index never shows uncommitted rows
            self._stats.update(updated)
            if updated:
                self._stats_version += 1
                self._stats_rows = len(self._stats) if compact else self._stats_rows + len(updated)
            self._retired.update(retirements)
            for pid in updated:
                self._rates[pid] = self._pass_rate(pid, self._stats[pid])
            self._next_seq += len(retirements)

    def _compaction_due(self, updated: dict[str, Stats]) -> bool:
        """Whether this commit's prompt_stats append leaves more superseded rows than the slack allows."""
        prompts = len(self._stats) + sum(pid not in self._stats for pid in updated)
        return self._stats_rows + len(updated) - prompts > max(STATS_SLACK_MIN, prompts // STATS_SLACK_FRACTION)

    def upsert_problems(self, records: Sequence[ProblemRecord]) -> int:
        """Insert or replace problems by prompt_id, in one transaction; returns the count."""
        self._check_writable()
        rows = [{
            "prompt_id": r.prompt_id, "domain": r.domain, "source": r.source,
            "prompt": json.dumps([m.model_dump() for m in r.prompt], ensure_ascii=False), "answer": r.answer,
            "tests": None if r.tests is None else r.tests.model_dump_json(), "difficulty_prior": r.difficulty_prior,
            "metadata": json.dumps(r.metadata, ensure_ascii=False, default=str),
        } for r in records]
        if not rows:
            return 0
        table = pa.Table.from_pylist(rows)
        with self._write_lock:
            self._con.register("_problems", table)
            try:
                self._con.execute(f"INSERT OR REPLACE INTO problems ({', '.join(table.column_names)}) "
                                  "SELECT * FROM _problems")
            finally:
                self._con.unregister("_problems")
        return len(rows)

    def problem_domains(self, prompt_ids: Sequence[str]) -> dict[str, str]:
        """prompt_id → domain for those of `prompt_ids` present in `problems`."""
        cur = self._cursor()
        try:
            rows = cur.execute("SELECT prompt_id, domain FROM problems WHERE prompt_id IN (SELECT unnest(?))",
                               [list(set(prompt_ids))]).fetchall()
        finally:
            cur.close()
        return dict(rows)

    def has_ingested(self, sha256: str) -> tuple[str, int, Any] | None:
        """(path, rows, time) of an earlier ingest of a file with this content hash, if any."""
        cur = self._cursor()
        try:
            return cur.execute("SELECT path, rows, ingested_at FROM ingests WHERE sha256 = ?", [sha256]).fetchone()
        finally:
            cur.close()

    # ------------------------------------------------------------------------------------------ sampler state
    def save_sampler_state(self, name: str, state: dict[str, Any], new_epochs: Sequence[tuple] = ()) -> None:
        """Store a sampler's state (and the epochs it just started: (domain, epoch, active, retired_before))."""
        self._check_writable()
        with self._write_lock:
            con = self._con
            con.execute("BEGIN TRANSACTION")
            try:
                con.execute("INSERT OR REPLACE INTO sampler_state (name, state, updated_at) VALUES (?, ?, now())",
                            [name, json.dumps(state)])
                for domain, epoch, active, retired_before in new_epochs:
                    con.execute("INSERT OR REPLACE INTO epochs (sampler, domain, epoch, active_prompts, "
                                "retired_before) VALUES (?, ?, ?, ?, ?)", [name, domain, epoch, active, retired_before])
                con.execute("COMMIT")
            except Exception:
                con.execute("ROLLBACK")
                raise
            for domain, epoch, *_ in new_epochs:
                self._epochs[domain] = max(epoch, self._epochs.get(domain, epoch))

    def load_sampler_state(self, name: str) -> dict[str, Any] | None:
        cur = self._cursor()
        try:
            row = cur.execute("SELECT state FROM sampler_state WHERE name = ?", [name]).fetchone()
        finally:
            cur.close()
        return None if row is None else json.loads(row[0])

    # ------------------------------------------------------------------------------------------ reads
    def pass_rates(self, prompt_ids: Sequence[str] | None = None) -> dict[str, PassRate]:
        """Per-prompt statistics for `prompt_ids` (all prompts when None); unknown ids are absent."""
        with self._index_lock:
            rates = self._rates  # immutable PassRate tuples, replaced (never changed) after each commit
            if prompt_ids is None:
                return dict(rates)
            return {pid: rates[pid] for pid in prompt_ids if pid in rates}

    def _pass_rate(self, pid: str, s: Stats) -> PassRate:
        retired = self._retired.get(pid)
        return PassRate(pid, s.domain, s.attempts, s.scored, s.correct, s.correct / s.scored if s.scored else None,
                        None if s.gstep == NO_STEP else s.gstep, s.gscored, s.gcorrect, retired is not None,
                        None if retired is None else retired.step)

    def retired_ids(self) -> set[str]:
        with self._index_lock:
            return set(self._retired)

    def retired_seq(self) -> dict[str, int]:
        """prompt_id → retirement sequence number (1, 2, ... in commit order); the sampler's watermark."""
        with self._index_lock:
            return {pid: r.seq for pid, r in self._retired.items()}

    def query(self, sql: str, *, timeout_s: float = 10.0, max_rows: int = 100_000) -> QueryResult:
        """Run one read-only statement with a time limit; at most `max_rows` rows are returned."""
        cur = self._cursor()
        try:
            return run_query(cur, sql, timeout_s=timeout_s, max_rows=max_rows)
        finally:
            cur.close()

    def snapshot(self, out_dir: str | Path, *, keep: int = 3) -> Path:
        """Write an atomic Parquet snapshot under `out_dir` (see `scalerl.curriculum.ledger.snapshot`)."""
        from scalerl.curriculum.ledger.snapshot import write_snapshot

        cur = self._cursor()
        try:
            return write_snapshot(cur, Path(out_dir), keep=keep)
        finally:
            cur.close()

    # ------------------------------------------------------------------------------------------ lifecycle
    def _cursor(self) -> duckdb.DuckDBPyConnection:
        if self._closed:
            raise LedgerError(f"ledger {self.path} is closed")
        with self._index_lock:
            return self._con.cursor()

    def _check_writable(self) -> None:
        if self._closed:
            raise LedgerError(f"ledger {self.path} is closed")
        if self.read_only:
            raise LedgerError(f"ledger {self.path} was opened read-only")

    def flush(self) -> None:
        """Move the write-ahead log into the database file (commits are already durable without it)."""
        if not self.read_only and not self._closed:
            with self._write_lock:
                self._con.execute("CHECKPOINT")

    def close(self) -> None:
        if not self._closed:
            with self._write_lock:
                self._closed = True
                self._con.close()
                if not self.read_only:
                    _release(self.path)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
