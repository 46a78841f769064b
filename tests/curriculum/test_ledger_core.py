"""Ledger writes, the pass-rate index against the `pass_rates` view, retirement, and the query guard."""

from __future__ import annotations

import random
import subprocess
import sys

import pyarrow as pa
import pytest
from scalerl.curriculum.ledger.models import LedgerError, QueryTimeoutError, ReadOnlyQueryError
from scalerl.curriculum.ledger.retirement import RetirementConfig
from scalerl.curriculum.ledger.store import Ledger
from scalerl.env.contracts.records import Verdict, VerifyItem

VIEW_COLUMNS = ("prompt_id", "domain", "attempts", "scored", "correct", "pass_rate", "last_group_step",
                "last_group_scored", "last_group_correct", "retired", "retired_step")


def items(pid: str, statuses: list[str], **ctx):
    its = [VerifyItem(domain="math", completion="x", answer="1", prompt_id=pid, sample_index=i, **ctx)
           for i in range(len(statuses))]
    return its, [Verdict.of(s) for s in statuses]


@pytest.fixture
def ledger(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as led:
        yield led


def view_rows(ledger: Ledger) -> dict[str, tuple]:
    res = ledger.query(f"SELECT {', '.join(VIEW_COLUMNS)} FROM pass_rates")
    return {r[0]: tuple(r) for r in res.rows}


def index_rows(ledger: Ledger) -> dict[str, tuple]:
    return {pid: tuple(getattr(r, c) for c in VIEW_COLUMNS) for pid, r in ledger.pass_rates().items()}


def test_record_keeps_only_items_with_prompt_id_and_item_context_wins(ledger):
    its, vs = items("a", ["correct", "wrong"], step=7)
    its.append(VerifyItem(domain="math", completion="x", answer="1"))
    vs.append(Verdict.of("correct"))
    assert ledger.record(its, vs, step=3, policy_version=2) == 2
    rows = ledger.query("SELECT step, policy_version, sample_index, correct FROM attempts ORDER BY sample_index").rows
    assert rows == [[7, 2, 0, True], [7, 2, 1, False]]


def test_index_equals_the_view_after_random_batches(tmp_path):
    rng = random.Random(0)
    path = tmp_path / "l.duckdb"
    with Ledger(path, retirement=RetirementConfig(threshold=0.75)) as ledger:
        for _ in range(40):
            rows = [{"prompt_id": f"p{rng.randrange(15)}", "domain": "math", "step": rng.choice([None, 1, 2, 3]),
                     "status": rng.choice(["correct", "correct", "wrong", "error", "timeout"])} for _ in range(20)]
            ledger.record_attempts(rows)
        assert index_rows(ledger) == view_rows(ledger)
        live = index_rows(ledger)
    with Ledger(path, retirement=RetirementConfig(threshold=0.75)) as reopened:  # the index rebuilt from the view
        assert index_rows(reopened) == live


def test_verifier_errors_are_not_scored_against_the_model(ledger):
    ledger.record(*items("a", ["correct", "error", "error", "wrong"]))
    r = ledger.pass_rates(["a", "unknown"])
    assert list(r) == ["a"]
    assert (r["a"].attempts, r["a"].scored, r["a"].correct, r["a"].pass_rate) == (4, 2, 1, 0.5)


def test_group_window_retires_on_one_good_group_and_retirement_is_permanent(ledger):
    ledger.record(*items("a", ["wrong"] * 16), step=1)
    ledger.record(*items("a", ["correct"] * 15 + ["wrong"]), step=2)
    assert ledger.retired_ids() == {"a"} and ledger.pass_rates()["a"].retired_step == 2
    ledger.record(*items("a", ["wrong"] * 16), step=3)
    assert ledger.retired_ids() == {"a"}
    assert ledger.query("SELECT step, window_samples, pass_rate FROM retired").rows == [[2, 16, 0.9375]]


def test_all_window_counts_every_sample(tmp_path):
    with Ledger(tmp_path / "l.duckdb", retirement=RetirementConfig(window="all")) as ledger:
        ledger.record(*items("a", ["wrong"] * 16), step=1)
        ledger.record(*items("a", ["correct"] * 16), step=2)
        assert ledger.retired_ids() == set()


def test_a_batch_spanning_steps_is_judged_group_by_group(ledger):
    rows = [{"prompt_id": "a", "domain": "code", "step": s, "status": "correct" if s == 1 else "wrong"}
            for s in (1, 1, 2, 2)]
    ledger.record_attempts(pa.Table.from_pylist(rows))
    assert ledger.pass_rates()["a"].retired_step == 1 and ledger.pass_rates()["a"].last_group_step == 2


def test_reopening_with_a_lower_threshold_retires_prompts_that_now_qualify(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as ledger:
        ledger.record(*items("a", ["correct"] * 3 + ["wrong"]))
        assert ledger.retired_ids() == set()
    with Ledger(tmp_path / "l.duckdb", retirement=RetirementConfig(threshold=0.75)) as ledger:
        assert ledger.retired_ids() == {"a"}


@pytest.mark.parametrize("sql", [
    "INSERT INTO attempts (prompt_id, domain, reward, status, correct) VALUES ('x', 'math', 1, 'correct', true)",
    "DELETE FROM attempts", "DROP TABLE attempts", "UPDATE attempts SET reward = 0",
    "CREATE TABLE t (a INT)", "COPY attempts TO '/tmp/x.csv'", "ATTACH '/tmp/other.duckdb'", "SET threads = 1",
    "PRAGMA version", "CHECKPOINT", "SELECT 1; DELETE FROM attempts", "BEGIN TRANSACTION",
])
def test_non_read_sql_is_refused_and_changes_nothing(ledger, sql):
    ledger.record(*items("a", ["correct"]))
    with pytest.raises(ReadOnlyQueryError):
        ledger.query(sql)
    assert ledger.query("SELECT count(*) FROM attempts").rows == [[1]]


def test_select_cannot_reach_the_file_system(ledger):
    with pytest.raises(LedgerError, match="disabled"):
        ledger.query("SELECT * FROM read_csv('/etc/hostname')")


def test_long_queries_are_stopped_at_their_time_limit(ledger):
    with pytest.raises(QueryTimeoutError):
        ledger.query("SELECT count(*) FROM range(100000000000) a", timeout_s=0.3)
    assert ledger.query("SELECT 42").rows == [[42]]  # the connection is still usable


def test_max_rows_truncates_and_says_so(ledger):
    res = ledger.query("SELECT * FROM range(10)", max_rows=3)
    assert res.rows == [[0], [1], [2]] and res.truncated


@pytest.mark.parametrize("rows, match", [
    ([{"prompt_id": "a", "domain": "math", "status": "maybe"}], "unknown status"),
    ([{"prompt_id": "a", "domain": "math", "status": "correct", "colour": "red"}], "unknown attempt column"),
    ([{"prompt_id": None, "domain": "math", "status": "correct"}], "'prompt_id' has 1 null"),
    ([{"prompt_id": "a", "domain": "math", "status": "wrong", "correct": True}], "contradicts"),
    ([{"prompt_id": "a", "domain": "math", "status": "wrong", "step": "soon"}], "'step'"),
    ([{"prompt_id": "a", "domain": "math", "status": "wrong", "step": -1}], "'step' has a negative"),
])
def test_bad_attempt_rows_are_refused_whole(ledger, rows, match):
    ok = {"prompt_id": "b", "domain": "math", "status": "correct"}
    with pytest.raises(LedgerError, match=match):
        ledger.record_attempts([ok] + rows)
    assert ledger.query("SELECT count(*) FROM attempts").rows == [[0]]


def test_missing_reward_comes_from_the_reward_table(ledger):
    ledger.record_attempts({"prompt_id": ["a", "a"], "domain": ["math", "math"], "status": ["correct", "timeout"]})
    assert ledger.query("SELECT reward FROM attempts ORDER BY reward").rows == [[0.0], [1.0]]


def test_read_only_and_closed_ledgers_refuse_writes(tmp_path):
    path = tmp_path / "l.duckdb"
    Ledger(path).close()
    with Ledger(path, read_only=True) as ro, pytest.raises(LedgerError, match="read-only"):
        ro.record(*items("a", ["correct"]))
    led = Ledger(path)
    led.close()
    with pytest.raises(LedgerError, match="closed"):
        led.query("SELECT 1")


def test_one_owner_per_file_with_a_pointer_to_the_owner(tmp_path):
    path = tmp_path / "l.duckdb"
    with Ledger(path):
        with pytest.raises(LedgerError, match="already open in this process"):
            Ledger(path)
        with pytest.raises(LedgerError, match="already open in this process"):
            Ledger(path, read_only=True)
        code = f"from scalerl.curriculum.ledger.store import Ledger; Ledger({str(path)!r}, read_only=True)"
        other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
        assert other.returncode != 0 and "held by another process" in other.stderr and "--url" in other.stderr
    Ledger(path).close()  # closing releases ownership
