"""The attempt column `rule` (schema 5): what decided each verdict, countable in SQL; a version-4 file
migrates with NULL rules for the rows it already had."""

from __future__ import annotations

import duckdb
from scalerl.curriculum.ledger.schema import MIGRATIONS, SCHEMA_VERSION, V1_DDL
from scalerl.curriculum.ledger.store import Ledger
from scalerl.env.contracts.records import Status, Verdict, VerifyItem


def verdict(status: Status, rule: str | None) -> Verdict:
    return Verdict.of(status, details={"rule": rule} if rule else {})


def test_rewards_per_rule_are_a_sql_count(tmp_path):
    items = [VerifyItem(id=f"i{k}", domain="math", completion="x", answer="1", prompt_id="p") for k in range(4)]
    verdicts = [verdict(Status.correct, "math_verify"), verdict(Status.correct, "parts"),
                verdict(Status.wrong, "parts"), verdict(Status.no_answer, None)]
    with Ledger(tmp_path / "l.duckdb") as ledger:
        ledger.record(items, verdicts, step=1)
        rows = ledger.query("SELECT rule, count(*) FILTER (WHERE correct), count(*) FROM attempts "
                            "GROUP BY rule ORDER BY rule NULLS LAST").rows
    assert rows == [["math_verify", 1, 1], ["parts", 1, 2], [None, 0, 1]]


def test_a_version_4_file_gains_the_column_with_nulls(tmp_path):
    path = tmp_path / "v4.duckdb"
    con = duckdb.connect(str(path))
    con.execute(V1_DDL)
    for version in range(1, 4):
        MIGRATIONS[version](con)
    con.execute("INSERT INTO ledger_meta VALUES ('schema_version', '4')")
    con.execute("INSERT INTO attempts (prompt_id, domain, step, reward, status, correct) "
                "VALUES ('a', 'math', 1, 1, 'correct', true)")
    con.close()
    with Ledger(path) as ledger:
        assert ledger.migrated_from == 4 and SCHEMA_VERSION >= 5
        assert ledger.query("SELECT prompt_id, rule FROM attempts").rows == [["a", None]]
