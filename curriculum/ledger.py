"""The DuckDB pass-rate ledger: one owning process appends scored samples; anyone may read.

Guarantees
- Acknowledged = committed: `record`/`record_attempts` return after one DuckDB transaction (the Arrow
  batch appended to `attempts`, plus any retirements it caused) has committed to the write-ahead log.
  A `kill -9` after the return loses nothing; a crash during the call loses that whole batch only, and
  the file reopens (DuckDB replays its WAL).
- Writes are batched: one `INSERT ... SELECT` from an Arrow table per call, never a row-at-a-time loop.
- Thread-safe: writers are serialised by a lock; `query` and the lookups run concurrently with them
  (each query on its own DuckDB cursor, MVCC snapshot isolation).
- SQL from outside (`query`) must be one SELECT statement; it runs with a time limit (interrupted on
  expiry) and with file-system access disabled (no `read_csv('/etc/passwd')` through the server).
- Retirement is decided by `curriculum.filters.passes` on each batch as it is recorded and is permanent.

Not guaranteed
- One writer process per file (DuckDB's own file lock enforces it: a second read-write open fails, and
  read-only opens fail while the owner runs; read through the owner's `/v1/ledger/query` or snapshots).
- `record` does not deduplicate: every call is new samples (duplicate *files* are refused by `ingest`).
- `record` accepts prompt_ids that are not in `problems` (the reward server scores prompts from any
  trainer); `curriculum.ingest` refuses them unless told otherwise.

The owner keeps an in-memory index of the `pass_rates` view (built from the view at open, then updated
after each commit, one immutable `PassRate` per prompt), so `pass_rates()` and `retired_ids()` are dict
lookups that never scan `attempts`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from curriculum.attempts import rows_from_verdicts, to_attempts_table
from curriculum.filters import RetirementConfig, passes
from curriculum.models import LedgerError, PassRate, QueryResult, QueryTimeoutError, ReadOnlyQueryError
from curriculum.schema import NO_STEP, check_readable, create_or_migrate
from scalerl_env.records import ProblemRecord, Verdict, VerifyItem

logger = logging.getLogger(__name__)

RETIREMENT_COLUMNS = ("prompt_id", "domain", "seq", "step", "epoch", "pass_rate", "window_samples", "threshold")
RETIREMENT_TYPES = (pa.string(), pa.string(), pa.int64(), pa.int64(), pa.int64(), pa.float64(), pa.int64(),
                    pa.float64())
INDEX_SQL = """SELECT prompt_id, domain, attempts, scored, correct, coalesce(last_group_step, -1),
                      last_group_scored, last_group_correct FROM pass_rates"""


class _Stats:
    """Mutable per-prompt counters mirroring one `pass_rates` row (window counts included)."""

    __slots__ = ("attempts", "correct", "domain", "gcorrect", "gscored", "gstep", "scored")

    def __init__(self, domain: str, attempts=0, scored=0, correct=0, gstep=NO_STEP - 1, gscored=0, gcorrect=0):
        self.domain, self.attempts, self.scored, self.correct = domain, attempts, scored, correct
        self.gstep, self.gscored, self.gcorrect = gstep, gscored, gcorrect

    def copy(self) -> _Stats:
        return _Stats(self.domain, self.attempts, self.scored, self.correct, self.gstep, self.gscored,
                      self.gcorrect)

    def add_group(self, gstep: int, n: int, scored: int, correct: int) -> None:
        self.attempts, self.scored, self.correct = self.attempts + n, self.scored + scored, self.correct + correct
        if gstep > self.gstep:
            self.gstep, self.gscored, self.gcorrect = gstep, scored, correct
        elif gstep == self.gstep:
            self.gscored, self.gcorrect = self.gscored + scored, self.gcorrect + correct

    def window(self, config: RetirementConfig) -> tuple[int, int]:
        return (self.gcorrect, self.gscored) if config.window == "group" else (self.correct, self.scored)


def _group_counts(table: pa.Table) -> tuple[dict[tuple[str, int], tuple[int, int, int]], dict[str, str]]:
    """{(prompt_id, step or NO_STEP): (rows, scored, correct)} in order of first appearance, and each
    prompt's first domain; one vectorised pass (Arrow hash aggregation), not a Python loop per row."""
    if table.num_rows == 0:
        return {}, {}
    keyed = pa.table({
        "pid": table["prompt_id"], "gstep": pc.fill_null(table["step"], NO_STEP), "domain": table["domain"],
        "scored": pc.cast(pc.not_equal(table["status"], "error"), pa.int64()),
        "correct": pc.cast(pc.fill_null(table["correct"], False), pa.int64()),
    })
    agg = keyed.group_by(["pid", "gstep"], use_threads=False).aggregate(
        [("scored", "count"), ("scored", "sum"), ("correct", "sum"), ("domain", "first")])
    cols = [agg[c].to_pylist() for c in ("pid", "gstep", "scored_count", "scored_sum", "correct_sum", "domain_first")]
    groups: dict[tuple[str, int], tuple[int, int, int]] = {}
    domains: dict[str, str] = {}
    for pid, gstep, n, scored, correct, domain in zip(*cols):
        groups[(pid, gstep)] = (n, scored, correct)
        domains.setdefault(pid, domain)
    return groups, domains


# DuckDB hands a second connect() to a file this process already holds the same database instance, so
# two Ledger writers in one process would each keep their own index; refuse the second one instead.
_OWNED: set[str] = set()
_OWNED_LOCK = threading.Lock()


def _connect(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    if read_only and not path.exists():
        raise LedgerError(f"ledger {path} does not exist")
    key = str(path.resolve())
    with _OWNED_LOCK:
        if key in _OWNED:
            raise LedgerError(f"ledger {path} is already open in this process; share that Ledger object")
        try:
            con = duckdb.connect(str(path), read_only=read_only, config={"enable_external_access": False})
        except duckdb.ConnectionException as exc:
            raise LedgerError(f"ledger {path} is already open in this process ({exc})") from exc
        except duckdb.IOException as exc:
            raise _lock_error(path, exc) from exc
        if not read_only:
            _OWNED.add(key)
        return con


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


class Ledger:
    """The pass-rate ledger in one DuckDB file. See the module docstring for what is guaranteed."""

    def __init__(self, path: str | Path, *, read_only: bool = False, retirement: RetirementConfig | None = None):
        self.path = Path(path)
        self.read_only = read_only
        self.retirement = retirement or RetirementConfig()
        self._write_lock = threading.RLock()
        self._index_lock = threading.Lock()
        self._con = _connect(self.path, read_only)
        try:
            if read_only:
                check_readable(self._con, str(self.path))
                self.migrated_from = None
            else:
                self.migrated_from = create_or_migrate(self._con, str(self.path))
            self._load_index()
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
        stats: dict[str, _Stats] = {}
        for pid, domain, attempts, scored, correct, gstep, gscored, gcorrect in self._con.execute(INDEX_SQL).fetchall():
            stats[pid] = _Stats(domain, attempts, scored, correct, gstep, gscored, gcorrect)
        retired = self._con.execute("SELECT prompt_id, seq, step FROM retirements").fetchall()
        epochs = self._con.execute("SELECT domain, max(epoch) FROM epochs GROUP BY domain").fetchall()
        self._stats = stats
        self._retired: dict[str, tuple[int, int | None]] = {pid: (seq, step) for pid, seq, step in retired}
        self._next_seq = max((seq for seq, _ in self._retired.values()), default=0) + 1
        self._epochs: dict[str, int] = {d: int(e) for d, e in epochs}
        self._rates = {pid: self._pass_rate(pid, st) for pid, st in stats.items()}

    def _reconcile_retirements(self) -> None:
        """Retire prompts whose current window already passes (after a migration or a config change)."""
        due = [(pid, s) for pid, s in self._stats.items()
               if pid not in self._retired and passes(*s.window(self.retirement), self.retirement)]
        if due:
            with self._write_lock:
                rows = self._retirement_rows([(pid, s.domain, None if s.gstep == NO_STEP else s.gstep,
                                               *s.window(self.retirement)) for pid, s in due])
                self._commit(None, rows, {})
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
        table = to_attempts_table(rows)
        if table.num_rows == 0 and ingest is None:
            return 0
        with self._write_lock:
            updated, retire = self._apply(table)
            self._commit(table, self._retirement_rows(retire), updated, ingest=ingest)
        return table.num_rows

    def _apply(self, table: pa.Table) -> tuple[dict[str, _Stats], list[tuple]]:
        """New counters for the prompts in `table` and the retirements they cause (not yet applied)."""
        groups, domains = _group_counts(table)
        updated: dict[str, _Stats] = {}
        retire: list[tuple] = []  # (prompt_id, domain, step, window correct, window scored) at decision time
        retiring: set[str] = set()
        for (pid, gstep), (n, scored, correct) in sorted(groups.items(), key=lambda kv: kv[0][1]):  # stable
            s = updated.get(pid)
            if s is None:
                old = self._stats.get(pid)
                s = updated[pid] = old.copy() if old is not None else _Stats(domains[pid])
            s.add_group(gstep, n, scored, correct)
            if (pid not in self._retired and pid not in retiring
                    and passes(*s.window(self.retirement), self.retirement)):
                retire.append((pid, s.domain, None if gstep == NO_STEP else gstep, *s.window(self.retirement)))
                retiring.add(pid)
        return updated, retire

    def _retirement_rows(self, retire: list[tuple]) -> list[tuple]:
        return [(pid, domain, self._next_seq + offset, step, self._epochs.get(domain), correct / scored, scored,
                 self.retirement.threshold)
                for offset, (pid, domain, step, correct, scored) in enumerate(retire)]

    def _commit(self, table: pa.Table | None, retirements: list[tuple], updated: dict[str, _Stats], *,
                ingest: tuple[str, str] | None = None) -> None:
        con = self._con
        con.execute("BEGIN TRANSACTION")
        try:
            if table is not None and table.num_rows:
                con.register("_batch", table)
                con.execute(f"INSERT INTO attempts ({', '.join(table.column_names)}) SELECT * FROM _batch")
            if retirements:  # one Arrow insert: executemany costs a statement per row (seconds for 10k)
                con.register("_retire", pa.Table.from_arrays(
                    [pa.array(col, typ) for col, typ in zip(zip(*retirements), RETIREMENT_TYPES)],
                    names=RETIREMENT_COLUMNS))
                try:
                    con.execute(f"INSERT INTO retirements ({', '.join(RETIREMENT_COLUMNS)}) SELECT * FROM _retire")
                finally:
                    con.unregister("_retire")
            if ingest is not None:
                con.execute("INSERT INTO ingests (sha256, path, rows) VALUES (?, ?, ?)",
                            [ingest[0], ingest[1], 0 if table is None else table.num_rows])
            con.execute("COMMIT")
        except Exception as exc:
            con.execute("ROLLBACK")
            raise LedgerError(f"write to {self.path} failed and was rolled back: {exc}") from exc
        finally:
            if table is not None and table.num_rows:
                con.unregister("_batch")
        with self._index_lock:  # only after the commit: the index never shows uncommitted rows
            self._stats.update(updated)
            for pid, _domain, seq, step, *_ in retirements:
                self._retired[pid] = (seq, step)
            for pid in {*updated, *(r[0] for r in retirements)}:
                self._rates[pid] = self._pass_rate(pid, self._stats[pid])
            self._next_seq += len(retirements)

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

    def _pass_rate(self, pid: str, s: _Stats) -> PassRate:
        retired = self._retired.get(pid)
        return PassRate(pid, s.domain, s.attempts, s.scored, s.correct, s.correct / s.scored if s.scored else None,
                        None if s.gstep == NO_STEP else s.gstep, s.gscored, s.gcorrect, retired is not None,
                        None if retired is None else retired[1])

    def retired_ids(self) -> set[str]:
        with self._index_lock:
            return set(self._retired)

    def retired_seq(self) -> dict[str, int]:
        """prompt_id → retirement sequence number (1, 2, ... in commit order); the sampler's watermark."""
        with self._index_lock:
            return {pid: seq for pid, (seq, _step) in self._retired.items()}

    def query(self, sql: str, *, timeout_s: float = 10.0, max_rows: int = 100_000) -> QueryResult:
        """Run one read-only statement with a time limit; at most `max_rows` rows are returned."""
        statement = check_read_only(sql)
        cur = self._cursor()
        timer = threading.Timer(timeout_s, cur.interrupt)
        timer.daemon = True
        try:
            timer.start()
            cur.execute(statement)
            columns = [d[0] for d in cur.description or []]
            rows = cur.fetchmany(max_rows + 1)
        except duckdb.InterruptException as exc:
            raise QueryTimeoutError(f"query ran past its time limit of {timeout_s} s and was stopped") from exc
        except duckdb.Error as exc:
            raise LedgerError(f"query failed: {exc}") from exc
        finally:
            timer.cancel()
            cur.close()
        return QueryResult(columns=columns, rows=[list(r) for r in rows[:max_rows]], truncated=len(rows) > max_rows)

    def snapshot(self, out_dir: str | Path, *, keep: int = 3) -> Path:
        """Write an atomic Parquet snapshot under `out_dir` (see `curriculum.snapshot`)."""
        from curriculum.snapshot import write_snapshot

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
