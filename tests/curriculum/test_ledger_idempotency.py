"""Insert-once recording (`Ledger.record_once`): each (idempotency key, item index) is one attempt row."""

from __future__ import annotations

import threading

import duckdb
import pytest
from scalerl.curriculum.ledger.idempotency import IdempotencyConflict
from scalerl.curriculum.ledger.schema import SCHEMA_VERSION, V1_DDL
from scalerl.curriculum.ledger.store import Ledger


def rows(prompts: list[str], status: str = "correct") -> list[dict]:
    return [{"prompt_id": p, "domain": "math", "status": status, "step": 1} for p in prompts]


def keys(key: str, n: int, status: str = "correct") -> list[tuple[str, int, str]]:
    return [(key, i, f'{{"status": "{status}", "reward": 1.0, "index": {i}}}') for i in range(n)]


def table_counts(ledger: Ledger) -> tuple[int, int, int]:
    [[attempts, pairs, stats]] = ledger.query(
        "SELECT (SELECT count(*) FROM attempts), (SELECT count(*) FROM idempotency), "
        "(SELECT sum(attempts) FROM pass_rates)").rows
    return attempts, pairs, stats


def test_replay_leaves_the_ledger_unchanged_and_returns_the_first_verdicts(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as ledger:
        assert ledger.record_once(rows(["a", "a", "b"]), keys("k1", 3)) == {}
        before = ledger.query("SELECT * FROM attempts ORDER BY ALL").rows
        rates = ledger.pass_rates()
        # The retry scored differently (e.g. a timeout first, correct now): the first verdict stands.
        replayed = ledger.record_once(rows(["a", "a", "b"], "wrong"), keys("k1", 3, "wrong"))
        assert sorted(replayed) == [0, 1, 2] and all('"correct"' in v for v in replayed.values())
        assert ledger.query("SELECT * FROM attempts ORDER BY ALL").rows == before
        assert ledger.pass_rates() == rates and table_counts(ledger) == (3, 3, 3)


def test_partial_replay_appends_only_the_new_items_and_repeats_in_a_batch_count_once(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as ledger:
        ledger.record_once(rows(["a", "b"]), keys("k", 2))
        # items 0, 1 again, item 2 new, and item 2 twice within the batch
        replayed = ledger.record_once(rows(["a", "b", "c", "c"]), [*keys("k", 3), ("k", 2, '{"dup": 1}')])
        assert sorted(replayed) == [0, 1, 3]
        assert table_counts(ledger) == (3, 3, 3)
        assert ledger.pass_rates()["c"].attempts == 1


def test_a_key_reused_for_another_prompt_is_refused_and_nothing_is_written(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as ledger:
        ledger.record_once(rows(["a"]), keys("k", 1))
        with pytest.raises(IdempotencyConflict, match="recorded for prompt 'a'"):
            ledger.record_once(rows(["z", "y"]), keys("k", 2))  # item 1 is new, but the batch is refused whole
        assert table_counts(ledger) == (1, 1, 1)
        assert ledger.record_once(rows(["q"]), keys("k2", 1)) == {}  # the ledger still writes afterwards
        assert table_counts(ledger) == (2, 2, 2)


def test_concurrent_writers_with_the_same_keys_record_each_pair_once(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as ledger:
        batches = [(rows([f"p{b}"] * 8), keys(f"key-{b}", 8)) for b in range(20)]

        def send():
            for batch in batches:
                ledger.record_once(*batch)

        threads = [threading.Thread(target=send) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert table_counts(ledger) == (160, 160, 160)


def test_survives_reopening_and_unkeyed_records_still_append(tmp_path):
    path = tmp_path / "l.duckdb"
    with Ledger(path) as ledger:
        ledger.record_once(rows(["a"]), keys("k", 1))
        ledger.record_attempts(rows(["a"]))
        ledger.record_attempts(rows(["a"]))
    with Ledger(path) as ledger:
        assert ledger.record_once(rows(["a"]), keys("k", 1)) == {0: '{"status": "correct", "reward": 1.0, "index": 0}'}
        assert table_counts(ledger) == (3, 1, 3)


def test_bad_keys_are_refused_naming_the_problem(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as ledger:
        with pytest.raises(Exception, match="2 idempotency keys for 1 attempt rows"):
            ledger.record_once(rows(["a"]), keys("k", 2))
        with pytest.raises(Exception, match="1..200 characters"):
            ledger.record_once(rows(["a"]), [("", 0, "{}")])
        assert table_counts(ledger)[0] == 0


def test_an_older_file_gains_the_idempotency_table(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute(V1_DDL)
    con.execute("INSERT INTO ledger_meta VALUES ('schema_version', '1')")
    con.execute("INSERT INTO attempts (prompt_id, domain, reward, status, correct) "
                "VALUES ('a', 'math', 1, 'correct', true)")
    con.close()
    with Ledger(path) as ledger:
        assert ledger.migrated_from == 1 and SCHEMA_VERSION >= 7
        assert ledger.record_once(rows(["a"]), keys("k", 1)) == {}
        assert table_counts(ledger) == (2, 1, 2)
