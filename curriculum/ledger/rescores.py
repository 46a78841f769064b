"""What re-scoring needs from the ledger: the stored completions with their problems, and the `rescores`
table that keeps a new verifier version's verdicts beside the originals.

`stored_attempts` pages through `attempts` in `attempt_id` order and gives each attempt its completion
(NULL unless the ledger stored it, `ledger.store_completions`) and its problem, read from `problems` or,
failing that, from a curriculum set's member record. `write_rescores` appends (or, for the same attempt,
verifier version and settings digest, replaces) rows of `rescores` in one transaction; `attempts` is never
written. Scoring is not done here: the curriculum does not import the verifiers
(`scalerl.env.ledger_rescore` does both).

Not guaranteed: a problem record read from `problems` carries no code `limits` (that table has no column
for them); a curriculum member's record does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import pyarrow as pa
from pydantic import ValidationError
from scalerl.curriculum.ledger.models import LedgerError
from scalerl.curriculum.ledger.store import Ledger
from scalerl.env.contracts.records import ProblemRecord

STORED_SQL = """
WITH members AS (SELECT prompt_id, any_value(record) AS record FROM curriculum_members
                 WHERE record IS NOT NULL GROUP BY prompt_id)
SELECT a.attempt_id, a.prompt_id, a.domain, a.correct, a.rule, a.completion,
       p.source, p.prompt, p.answer, p.tests, p.metadata, m.record
FROM attempts a LEFT JOIN problems p USING (prompt_id) LEFT JOIN members m USING (prompt_id)
WHERE a.attempt_id > ? AND (? IS NULL OR a.domain = ?)
ORDER BY a.attempt_id LIMIT ?"""

RESCORE_SCHEMA = pa.schema([
    ("attempt_id", pa.int64()), ("prompt_id", pa.string()), ("domain", pa.string()),
    ("verifier_version", pa.string()), ("settings_digest", pa.string()), ("status", pa.string()),
    ("reward", pa.float64()), ("correct", pa.bool_()), ("rule", pa.string()),
])


class StoredAttempt(NamedTuple):
    """One attempt as re-scoring sees it; `completion` and `problem` are None when the ledger lacks them."""

    attempt_id: int
    prompt_id: str
    domain: str
    correct: bool
    rule: str | None
    completion: str | None
    problem: ProblemRecord | None


def _problem(row: tuple) -> ProblemRecord | None:
    prompt_id, domain, source, prompt, answer, tests, metadata, record = row
    try:
        if record is not None:
            return ProblemRecord.model_validate_json(record)
        if source is not None:
            return ProblemRecord(prompt_id=prompt_id, domain=domain, source=source, prompt=json.loads(prompt),
                                 answer=answer, tests=None if tests is None else json.loads(tests),
                                 metadata=json.loads(metadata) if metadata else {})
    except (ValidationError, ValueError):  # a reference this scalerl cannot read cannot be re-scored
        return None
    return None


def stored_attempts(ledger: Ledger, *, domain: str | None = None, limit: int | None = None,
                    page_rows: int = 1024) -> Iterator[list[StoredAttempt]]:
    """The ledger's attempts (of `domain`; the first `limit`), oldest first, in pages of `page_rows`."""
    after, left = -1, limit
    cur = ledger._cursor()  # the package's own reads: a cursor of the owner's connection (MVCC snapshot)
    try:
        while left is None or left > 0:
            n = page_rows if left is None else min(page_rows, left)
            rows = cur.execute(STORED_SQL, [after, domain, domain, n]).fetchall()
            if not rows:
                return
            yield [StoredAttempt(r[0], r[1], r[2], r[3], r[4], r[5], _problem((r[1], r[2], *r[6:])))
                   for r in rows]
            after = rows[-1][0]
            left = None if left is None else left - len(rows)
    finally:
        cur.close()


def write_rescores(ledger: Ledger, rows: Sequence[dict[str, Any]]) -> int:
    """Append re-scored verdicts (`RESCORE_SCHEMA` keys) in one transaction; returns the row count."""
    ledger._check_writable()
    if not rows:
        return 0
    table = pa.Table.from_pylist(list(rows), schema=RESCORE_SCHEMA)
    names = ", ".join(RESCORE_SCHEMA.names)
    with ledger._write_lock:  # the owner's one writer, as for every other write of this file
        con = ledger._con
        con.register("_rescores", table)
        try:
            con.execute(f"INSERT OR REPLACE INTO rescores ({names}) SELECT {names} FROM _rescores")
        except Exception as exc:
            raise LedgerError(f"writing re-scored verdicts to {ledger.path} failed: {exc}") from exc
        finally:
            con.unregister("_rescores")
    return table.num_rows
