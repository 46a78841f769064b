"""Schema versions: newer files are refused untouched, older ones migrate, foreign files are refused."""

from __future__ import annotations

import duckdb
import pytest
from scalerl.curriculum.ledger.models import LedgerError
from scalerl.curriculum.ledger.schema import SCHEMA_VERSION, V1_DDL, LedgerSchemaError
from scalerl.curriculum.ledger.store import Ledger


def make_v1(path) -> None:
    con = duckdb.connect(str(path))
    con.execute(V1_DDL)
    con.execute("INSERT INTO ledger_meta VALUES ('schema_version', '1')")
    rows = [("a", "math", 1, "correct", True)] * 9
    rows += [("a", "math", 1, "wrong", False), ("b", "code", 2, "wrong", False)]
    con.executemany("INSERT INTO attempts (prompt_id, domain, step, reward, status, correct) "
                    "VALUES (?, ?, ?, 0, ?, ?)", rows)
    con.close()


def test_an_older_file_migrates_and_keeps_its_history(tmp_path):
    path = tmp_path / "v1.duckdb"
    make_v1(path)
    with pytest.raises(LedgerSchemaError, match="open it once read-write"):
        Ledger(path, read_only=True)
    with Ledger(path) as ledger:
        assert ledger.migrated_from == 1
        version = ledger.query("SELECT value FROM ledger_meta WHERE key = 'schema_version'").rows
        assert version == [[str(SCHEMA_VERSION)]]
        rates = ledger.pass_rates()
        assert (rates["a"].attempts, rates["a"].correct, rates["b"].correct) == (10, 9, 0)
        assert ledger.retired_ids() == {"a"}  # 9/10 = 0.9 meets the rule, decided right after migrating
        assert ledger.query("SELECT count(*) FROM attempts WHERE item_id IS NULL").rows == [[11]]
    with Ledger(path, read_only=True) as ledger:
        assert ledger.retired_ids() == {"a"}


def test_a_newer_file_is_refused_and_left_unchanged(tmp_path):
    path = tmp_path / "new.duckdb"
    Ledger(path).close()
    con = duckdb.connect(str(path))
    con.execute("UPDATE ledger_meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    con.close()
    for read_only in (False, True):
        with pytest.raises(LedgerSchemaError, match=f"schema version {SCHEMA_VERSION + 1}"):
            Ledger(path, read_only=read_only)
    con = duckdb.connect(str(path), read_only=True)
    version = con.execute("SELECT value FROM ledger_meta WHERE key='schema_version'").fetchone()
    assert version == (str(SCHEMA_VERSION + 1),)
    con.close()


def test_a_database_that_is_not_a_ledger_is_refused(tmp_path):
    path = tmp_path / "other.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE users (name VARCHAR)")
    con.close()
    with pytest.raises(LedgerSchemaError, match="not a scalerl ledger"):
        Ledger(path)


def test_missing_file_read_only_is_a_clear_error(tmp_path):
    with pytest.raises(LedgerError, match="does not exist"):
        Ledger(tmp_path / "nope.duckdb", read_only=True)
