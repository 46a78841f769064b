"""Instruction-following sources end to end: `data prepare` + `data check` on the fixtures made here
(RLVR-IFeval's and IFEval's public row formats), rows the verifier could not score, and `data generate if`."""

from __future__ import annotations

import json

from scalerl.env.cli import build_app
from scalerl.env.sources.manifest import FIXTURE_DIR, load_manifest
from scalerl.env.sources.verl import read_records
from scalerl.verifiers.ifeval.reference import parse_reference
from typer.testing import CliRunner


def _run(*args: str):
    return CliRunner().invoke(build_app(), list(args))


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURE_DIR / name).read_text().splitlines()]


def test_rlvr_fixture_prepares_and_every_gold_response_checks(tmp_path):
    out = tmp_path / "rlvr.parquet"
    result = _run("data", "prepare", "rlvr-ifeval", "--fixture", "--holdout", "2", "--out", str(out))
    assert result.exit_code == 0, result.output
    train, errors = read_records(out)
    held, _ = read_records(tmp_path / "rlvr.heldout.parquet")
    assert errors == [] and len(train) == 8 and len(held) == 2
    rows = {row["messages"][0]["content"]: row for row in _rows("rlvr_ifeval.jsonl")}
    for record in train + held:
        row = rows[record.prompt[0].content]  # the user turn as given: the domain appends no instruction
        assert record.domain == "if" and record.source == "rlvr-ifeval" and len(record.prompt) == 1
        assert record.answer == row["ground_truth"] and record.metadata["solution"] == row["response"]
        assert record.metadata["constraint_type"] == row["constraint_type"]
        assert len(parse_reference(record.answer)) == 1
    for path in (out, tmp_path / "rlvr.heldout.parquet"):
        checked = _run("data", "check", str(path))
        assert checked.exit_code == 0, checked.output
        assert f"{len(read_records(path)[0])} correct, 0 failing, 0 unchecked" in checked.output


def test_ifeval_fixture_reads_instruction_ids_and_kwargs(tmp_path):
    out = tmp_path / "ifeval.parquet"
    assert _run("data", "prepare", "ifeval", "--fixture", "--out", str(out)).exit_code == 0
    records, _ = read_records(out)
    rows = _rows("ifeval.jsonl")
    assert [r.metadata["row_id"] for r in records] == [row["key"] for row in rows]
    assert [[n for n, _ in parse_reference(r.answer)] for r in records] == [row["instruction_id_list"] for row in rows]
    checked = _run("data", "check", str(out))
    assert checked.exit_code == 0 and f"{len(rows)} correct, 0 failing" in checked.output, checked.output


def test_a_wrong_gold_response_fails_the_check(tmp_path):
    rows = _rows("rlvr_ifeval.jsonl")[:2]
    rows[0]["response"] = rows[0]["response"].upper()  # the first row asks for lowercase
    raw = tmp_path / "rows.jsonl"
    raw.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "bad.parquet"
    assert _run("data", "prepare", "rlvr-ifeval", "--data-files", str(raw), "--out", str(out)).exit_code == 0
    checked = _run("data", "check", str(out))
    assert checked.exit_code == 1 and "1 correct, 1 failing" in checked.output
    assert "change_case:english_lowercase" in checked.output or "wrong" in checked.output


def test_rows_the_verifier_cannot_score_are_skipped_naming_the_column(tmp_path):
    rows = _rows("rlvr_ifeval.jsonl")[:3]
    rows[1]["ground_truth"] = json.dumps({"func_name": "validate_haiku"})
    rows[2]["ground_truth"] = json.dumps({"func_name": "verify_bullet_points", "N": None})
    raw = tmp_path / "rows.jsonl"
    raw.write_text("".join(json.dumps(r) + "\n" for r in rows))
    errors = tmp_path / "errors.jsonl"
    out = tmp_path / "some.parquet"
    result = _run("data", "prepare", "rlvr-ifeval", "--data-files", str(raw), "--out", str(out),
                  "--errors", str(errors))
    assert result.exit_code == 0, result.output
    assert len(read_records(out)[0]) == 1
    reported = [json.loads(line) for line in errors.read_text().splitlines()]
    assert [e["row"] for e in reported] == [2, 3]
    assert all("ground_truth" in e["message"] for e in reported)
    assert "validate_haiku" in reported[0]["message"] and "num_bullets" in reported[1]["message"]


def test_the_manifests_load_with_the_if_domain():
    assert load_manifest("rlvr-ifeval").domain == load_manifest("ifeval").domain == "if"


def test_generated_if_problems_check(tmp_path):
    out = tmp_path / "gen.parquet"
    result = _run("data", "generate", "if", "--count", "120", "--seed", "3", "--level", "2", "--out", str(out))
    assert result.exit_code == 0, result.output
    checked = _run("data", "check", str(out))
    assert checked.exit_code == 0 and "120 correct, 0 failing" in checked.output, checked.output


def test_if_records_round_trip_through_verl_parquet_and_a_foreign_row_imports(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from scalerl.env.sources.generators import generate
    from scalerl.env.sources.verl import write_records

    records = generate("if", seed=0, count=30, level=2)
    path = tmp_path / "if.parquet"
    write_records(records, path)
    assert [r.model_dump() for r in read_records(path)[0]] == [r.model_dump() for r in records]
    row = _rows("rlvr_ifeval.jsonl")[0]
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(pa.Table.from_pylist([{
        "data_source": "allenai/RLVR-IFeval", "prompt": row["messages"], "ability": "instruction_following",
        "reward_model": {"style": "rule", "ground_truth": row["ground_truth"]}, "extra_info": {"index": 0}}]), foreign)
    [record], errors = read_records(foreign)
    assert errors == [] and record.domain == "if" and record.answer == row["ground_truth"]
