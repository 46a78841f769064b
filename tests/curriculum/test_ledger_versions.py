"""Schema 8: verifier versions, stored completions, the detail columns, `rescores` and per-version pass rates."""

from __future__ import annotations

import json

import duckdb
import pytest
from scalerl.curriculum.ledger.ingest import ingest_file
from scalerl.curriculum.ledger.ledger_config import LedgerConfig
from scalerl.curriculum.ledger.rescores import stored_attempts, write_rescores
from scalerl.curriculum.ledger.schema import MIGRATIONS, SCHEMA_VERSION, V1_DDL
from scalerl.curriculum.ledger.sets import save_set
from scalerl.curriculum.ledger.store import Ledger
from scalerl.env.contracts.records import ProblemRecord, Verdict, VerifyItem


def make_v7(path) -> None:
    con = duckdb.connect(str(path))
    con.execute(V1_DDL)
    for version in range(1, 7):
        MIGRATIONS[version](con)
    con.execute("INSERT INTO ledger_meta VALUES ('schema_version', '7')")
    con.executemany("INSERT INTO attempts (prompt_id, domain, step, reward, status, correct, rule) "
                    "VALUES (?, 'math', 1, ?, ?, ?, ?)",
                    [("a", 1.0, "correct", True, "fast_path"), ("a", 0.0, "wrong", False, None),
                     ("b", 0.0, "wrong", False, None)])
    con.close()


def item(prompt_id: str = "p", completion: str = "\\boxed{2}") -> VerifyItem:
    return VerifyItem(domain="math", completion=completion, answer="2", prompt_id=prompt_id)


def verdict(status: str, **details) -> Verdict:
    return Verdict.of(status, details={"verifier_version": "v1", "settings_digest": "d1", **details})


def test_a_version_7_file_migrates_numbers_its_attempts_and_keeps_its_verdicts(tmp_path):
    path = tmp_path / "v7.duckdb"
    make_v7(path)
    with Ledger(path) as ledger:
        assert ledger.migrated_from == 7
        assert ledger.query("SELECT value FROM ledger_meta WHERE key = 'schema_version'").rows == [
            [str(SCHEMA_VERSION)]]
        rows = ledger.query("SELECT attempt_id, prompt_id, status, rule, verifier_version, settings_digest, "
                            "completion, second_opinion, turns, tool_calls FROM attempts ORDER BY attempt_id").rows
        assert rows == [[1, "a", "correct", "fast_path", *[None] * 6], [2, "a", "wrong", None, *[None] * 6],
                        [3, "b", "wrong", None, *[None] * 6]]
        ledger.record([item("a")], [verdict("correct")])  # a new row continues the numbering
        assert ledger.query("SELECT max(attempt_id), count(DISTINCT attempt_id) FROM attempts").rows == [[4, 4]]
        assert ledger.query("SELECT * FROM rescores").rows == []


def test_details_fill_their_columns_and_wrong_types_are_null(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as ledger:
        ledger.record([item(), item(), item()], [
            verdict("wrong", rule="parts", second_opinion="accepts", turns=3, tool_calls=2),
            verdict("wrong", second_opinion="rejects", turns=True, tool_calls="2"),  # bool / str are not counts
            Verdict.of("correct", details={"rule": 5}),
        ])
        rows = ledger.query("SELECT rule, verifier_version, settings_digest, second_opinion, turns, tool_calls "
                            "FROM attempts ORDER BY attempt_id").rows
    assert rows == [["parts", "v1", "d1", "accepts", 3, 2], [None, "v1", "d1", "rejects", None, None],
                    [None, None, None, None, None, None]]


def test_completions_are_kept_only_when_the_ledger_is_told_to(tmp_path):
    for store, expected in ((False, [None]), (True, ["\\boxed{2}"])):
        with Ledger(tmp_path / f"{store}.duckdb", config=LedgerConfig(store_completions=store)) as ledger:
            ledger.record([item()], [verdict("correct")])
            ledger.record_attempts([{"prompt_id": "q", "domain": "math", "status": "wrong", "completion": "x"}])
            ledger.record_once([{"prompt_id": "r", "domain": "math", "status": "wrong", "completion": "y"}],
                               [("key", 0, "{}")])
            got = [r[0] for r in ledger.query("SELECT completion FROM attempts ORDER BY attempt_id").rows]
        assert got == (expected + ["x", "y"] if store else [None, None, None])
    assert LedgerConfig().store_completions is False


def test_rescores_sit_beside_the_originals_and_pass_rates_read_one_version(tmp_path):
    record = ProblemRecord(prompt_id="p", domain="math", source="t", prompt=[{"role": "user", "content": "1+1?"}],
                           answer="2")
    with Ledger(tmp_path / "l.duckdb", config=LedgerConfig(store_completions=True)) as ledger:
        ledger.upsert_problems([record])
        ledger.record([item(), item(completion="3"), item("unknown")],
                      [verdict("correct"), verdict("wrong"), verdict("wrong")])
        [page] = list(stored_attempts(ledger))
        assert [(a.attempt_id, a.completion, a.problem) for a in page] == [
            (1, "\\boxed{2}", record), (2, "3", record), (3, "\\boxed{2}", None)]
        assert [len(p) for p in stored_attempts(ledger, limit=3, page_rows=2)] == [2, 1]
        assert list(stored_attempts(ledger, domain="code")) == []
        new = {"prompt_id": "p", "domain": "math", "verifier_version": "v2", "settings_digest": "d1", "rule": None}
        write_rescores(ledger, [{**new, "attempt_id": 1, "status": "wrong", "reward": 0.0, "correct": False},
                                {**new, "attempt_id": 2, "status": "wrong", "reward": 0.0, "correct": False}])
        # the same attempt and version again replaces that rescore, never the original
        write_rescores(ledger, [{**new, "attempt_id": 2, "status": "correct", "reward": 1.0, "correct": True}])
        originals = ledger.query("SELECT attempt_id, status FROM attempts ORDER BY attempt_id").rows
        assert originals == [[1, "correct"], [2, "wrong"], [3, "wrong"]]
        rates = ledger.query("SELECT verifier_version, prompt_id, verdicts, correct, pass_rate "
                             "FROM version_pass_rates ORDER BY ALL").rows
        assert rates == [["v1", "p", 2, 1, 0.5], ["v1", "unknown", 1, 0, 0.0], ["v2", "p", 2, 1, 0.5]]
        # a rescore under the original's own version and digest does not count that attempt twice
        write_rescores(ledger, [{**new, "verifier_version": "v1", "attempt_id": 1, "status": "wrong",
                                 "reward": 0.0, "correct": False}])
        assert ledger.query("SELECT verdicts, correct FROM version_pass_rates "
                            "WHERE verifier_version = 'v1' AND prompt_id = 'p'").rows == [[2, 1]]


@pytest.mark.parametrize("blank_line", [False, True])  # the column-wise path, and the per-line one
def test_ingest_takes_the_detail_columns_from_details(tmp_path, blank_line):
    lines = [{"prompt_id": "p", "domain": "math", "status": "correct",
              "details": {"rule": "parts", "verifier_version": "v1", "settings_digest": "d1", "turns": 2}},
             {"prompt_id": "p", "domain": "math", "status": "wrong",
              "details": {"rule": "parts", "verifier_version": "v1", "settings_digest": "d1", "turns": 2**40}},
             {"prompt_id": "q", "domain": "math", "status": "wrong"}]
    text = "\n".join(json.dumps(line) for line in lines) + "\n"
    path = tmp_path / "verdicts.jsonl"
    path.write_text(text.replace("\n", "\n\n", 1) if blank_line else text)
    with Ledger(tmp_path / "l.duckdb") as ledger:
        assert ingest_file(ledger, path, allow_unknown=True) == 3
        rows = ledger.query("SELECT rule, verifier_version, settings_digest, turns, tool_calls, completion "
                            "FROM attempts ORDER BY attempt_id").rows
    assert rows == [["parts", "v1", "d1", 2, None, None], ["parts", "v1", "d1", None, None, None], [None] * 6]


def test_a_curriculum_members_record_is_the_problem_when_problems_lacks_it(tmp_path):
    record = ProblemRecord(prompt_id="m", domain="code", source="set", prompt=[{"role": "user", "content": "echo"}],
                           tests={"kind": "stdio", "cases": [{"input": "1", "output": "1"}]}, limits={"time_s": 2})
    with Ledger(tmp_path / "l.duckdb", config=LedgerConfig(store_completions=True)) as ledger:
        save_set(ledger, "s", 0, {"code": 1.0}, {}, [("m", "code", "set", "train", record.model_dump_json())])
        ledger.record([record.verify_item("print(input())")], [verdict("correct")])
        [[attempt]] = list(stored_attempts(ledger))
    assert attempt.problem == record and attempt.problem.limits.time_s == 2  # `problems` would have no limits
