"""Bulk ingest refuses bad files as a whole, naming the lines, and never counts a file twice."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from scalerl.curriculum.ledger.ingest import ingest_file
from scalerl.curriculum.ledger.models import IngestError
from scalerl.curriculum.ledger.store import Ledger
from scalerl.env.cli import build_app
from scalerl.env.contracts.records import ChatMessage, ProblemRecord
from typer.testing import CliRunner


def problem(pid: str, domain: str = "math") -> ProblemRecord:
    return ProblemRecord(prompt_id=pid, domain=domain, source="t", answer="1",
                         prompt=[ChatMessage(role="user", content=pid)]) if domain == "math" else None


@pytest.fixture
def ledger(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as led:
        led.upsert_problems([problem("p1"), problem("p2")])
        yield led


def write(path, lines: list) -> str:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return str(path)


def count(ledger: Ledger) -> int:
    return ledger.query("SELECT count(*) FROM attempts").rows[0][0]


def test_good_file_is_ingested_with_domain_from_problems(ledger, tmp_path):
    f = write(tmp_path / "v.jsonl", [{"prompt_id": "p1", "status": "correct", "step": 3}, "",
                                     {"prompt_id": "p2", "status": "no_answer", "reward": -0.5}])
    assert ingest_file(ledger, f) == 2
    assert ledger.query("SELECT prompt_id, domain, step, reward, correct FROM attempts ORDER BY prompt_id").rows == [
        ["p1", "math", 3, 1.0, True], ["p2", "math", None, -0.5, False]]


def test_malformed_lines_are_reported_with_line_numbers_and_nothing_is_written(ledger, tmp_path):
    f = write(tmp_path / "v.jsonl", [
        {"prompt_id": "p1", "status": "correct"},
        "{not json",
        {"prompt_id": "p1", "status": "great"},
        {"prompt_id": "p1", "status": "wrong", "colour": "red"},
        {"prompt_id": "p1", "status": "wrong", "step": -1},
    ])
    with pytest.raises(IngestError) as err:
        ingest_file(ledger, f)
    msg = str(err.value)
    assert "4 malformed line(s)" in msg
    for fragment in (":2: not JSON", ":3: status", ":4: colour: Extra inputs", ":5: step"):
        assert fragment in msg
    assert count(ledger) == 0
    assert ledger.has_ingested("x") is None


def test_unknown_prompt_ids_are_refused_unless_allowed_with_a_domain(ledger, tmp_path):
    f = write(tmp_path / "v.jsonl", [{"prompt_id": "p1", "status": "correct"},
                                     {"prompt_id": "ghost", "status": "correct"}])
    with pytest.raises(IngestError, match=r"(?s)--allow-unknown.*:2: unknown prompt_id 'ghost'"):
        ingest_file(ledger, f)
    with pytest.raises(IngestError, match=r":2: prompt_id 'ghost' is not in problems; give its 'domain'"):
        ingest_file(ledger, f, allow_unknown=True)
    g = write(tmp_path / "w.jsonl", [{"prompt_id": "ghost", "status": "correct", "domain": "code"}])
    assert ingest_file(ledger, g, allow_unknown=True) == 1 and count(ledger) == 1


def test_a_domain_that_contradicts_the_problem_is_refused(ledger, tmp_path):
    f = write(tmp_path / "v.jsonl", [{"prompt_id": "p1", "status": "correct", "domain": "code"}])
    with pytest.raises(IngestError, match=r":1: domain 'code' but problem 'p1' is 'math'"):
        ingest_file(ledger, f)


def test_the_same_file_content_is_refused_the_second_time_even_renamed(ledger, tmp_path):
    lines = [{"prompt_id": "p1", "status": "correct"}]
    assert ingest_file(ledger, write(tmp_path / "a.jsonl", lines)) == 1
    with pytest.raises(IngestError, match="already ingested"):
        ingest_file(ledger, write(tmp_path / "b.jsonl", lines))
    assert count(ledger) == 1


def test_cli_reports_line_numbers_and_exits_2(tmp_path):
    path = tmp_path / "cli.duckdb"
    f = write(tmp_path / "v.jsonl", [{"prompt_id": "p1", "status": "correct", "domain": "math"}, "[1, 2]"])
    out = CliRunner().invoke(build_app(), ["ledger", "ingest", "--ledger", str(path), "--file", f, "--allow-unknown"])
    assert out.exit_code == 2 and "v.jsonl:2:" in out.stderr
    out = CliRunner().invoke(build_app(), ["ledger", "query", "DELETE FROM attempts", "--ledger", str(path)])
    assert out.exit_code == 2 and "only read statements" in out.stderr
    missing = tmp_path / "missing.jsonl"  # read in a thread by the command: its error still ends it cleanly
    out = CliRunner().invoke(build_app(), ["ledger", "ingest", "--ledger", str(path), "--file", str(missing)])
    assert out.exit_code == 2 and f"cannot read {missing}" in out.stderr


def verdict_lines(n: int) -> list[dict]:
    statuses = ("correct", "wrong", "error", "no_answer")
    return [{"id": f"i{k}", "status": statuses[k % 4], "reward": None if k % 3 else 0.5,
             "details": {"path": "fast", "extracted": str(k)} if k % 2 else {}, "elapsed_s": 0.01 * k,
             "prompt_id": f"p{1 + k % 2}", "domain": "math", "step": k // 4, "sample_index": k % 4,
             **({"truncated": True, "completion_tokens": 7} if k % 5 == 0 else {})} for k in range(n)]


ROWS_SQL = ("SELECT prompt_id, domain, step, policy_version, sample_index, reward, status, correct, truncated, "
            "completion_tokens, item_id, elapsed_s FROM attempts ORDER BY item_id")


def test_bulk_path_stores_what_the_per_line_path_stores(tmp_path, monkeypatch):
    import scalerl.curriculum.ledger.ingest as ingest

    lines = verdict_lines(40)
    results = []
    for bulk in (True, False):
        with Ledger(tmp_path / f"{bulk}.duckdb") as led:
            led.upsert_problems([problem("p1"), problem("p2")])
            if bulk:  # the per-line parser must not even run on a clean file
                monkeypatch.setattr(ingest, "parse_lines", lambda *a: pytest.fail("per-line path used"))
            else:
                monkeypatch.setattr(ingest, "bulk_table", lambda *a: None)
            assert ingest_file(led, write(tmp_path / f"{bulk}.jsonl", lines)) == 40
            results.append(led.query(ROWS_SQL).rows)
            monkeypatch.undo()
    assert results[0] == results[1] and len(results[0]) == 40


@pytest.mark.parametrize("bad,fragment", [
    ({"step": "3"}, None),  # pydantic coerces "3"; the bulk reader does not: the per-line path takes it
    ({"details": None}, ":2: details"), ({"elapsed_s": None}, ":2: elapsed_s"), ({"prompt_id": ""}, ":2: prompt_id"),
    ({"domain": "code"}, ":2: domain 'code'"), ({"prompt_id": "p9"}, ":2: unknown prompt_id"),
    ({"colour": 1}, ":2: colour"), ({"sample_index": -1}, ":2: sample_index"),
])
def test_anything_the_bulk_checks_refuse_gets_the_per_line_verdict(ledger, tmp_path, bad, fragment):
    lines = verdict_lines(3)
    lines[1] = {**lines[1], **bad}
    f = write(tmp_path / "v.jsonl", lines)
    if fragment is None:
        assert ingest_file(ledger, f) == 3
        return
    with pytest.raises(IngestError) as err:
        ingest_file(ledger, f)
    assert fragment in str(err.value)
    assert count(ledger) == 0


def test_two_objects_on_one_line_are_refused(ledger, tmp_path):
    one, two, three = (json.dumps(x) for x in verdict_lines(3))
    with pytest.raises(IngestError, match=":1: not JSON"):
        ingest_file(ledger, write(tmp_path / "v.jsonl", [one + " " + two, three]))


INGEST_PROCESS = """
import sys
from scalerl.env.cli import main
sys.argv = ["scalerl-env", "ledger", "ingest", "--ledger", sys.argv[1], "--file", sys.argv[2], "--allow-unknown"]
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print("pandas loaded:", sys.modules.get("pandas") is not None)
"""


def test_the_ingest_command_runs_without_loading_pandas(tmp_path):
    path, f = tmp_path / "p.duckdb", write(tmp_path / "v.jsonl", verdict_lines(40))
    out = subprocess.run([sys.executable, "-c", INGEST_PROCESS, str(path), f], capture_output=True, text=True,
                         check=True)
    assert "ingested 40 rows" in out.stdout and "pandas loaded: False" in out.stdout
    with Ledger(path, read_only=True) as ledger:
        assert sum(r.attempts for r in ledger.pass_rates().values()) == 40
