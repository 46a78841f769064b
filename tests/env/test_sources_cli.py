"""`scalerl-env data` commands end to end: generate, prepare with hold-out, check and --drop-failing."""

from __future__ import annotations

import json

from scalerl.env.cli import build_app
from scalerl.env.sources.verl import read_records, write_records
from typer.testing import CliRunner


def _run(*args: str):
    return CliRunner().invoke(build_app(), list(args))


def test_generate_then_check_passes(tmp_path):
    out = tmp_path / "gen.parquet"
    result = _run("data", "generate", "math", "--count", "300", "--seed", "4", "--level", "3", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert len(read_records(out)[0]) == 300
    checked = _run("data", "check", str(out))
    assert checked.exit_code == 0, checked.output
    assert "300 correct, 0 failing" in checked.output


def test_prepare_fixture_with_holdout(tmp_path):
    out = tmp_path / "m.parquet"
    result = _run("data", "prepare", "math500", "--fixture", "--holdout", "1", "--out", str(out))
    assert result.exit_code == 0, result.output
    train, _ = read_records(out)
    held, _ = read_records(tmp_path / "m.heldout.parquet")
    assert len(train) == 3 and len(held) == 1
    assert not {r.prompt_id for r in train} & {r.prompt_id for r in held}


def test_check_reports_and_drops_a_wrong_gold_answer(tmp_path):
    path = tmp_path / "g.parquet"
    _run("data", "prepare", "gsm8k", "--fixture", "--out", str(path))
    records, _ = read_records(path)
    broken = records[1].model_copy(update={"answer": "999999"})
    write_records([records[0], broken, *records[2:]], path)
    report = tmp_path / "fail.jsonl"
    checked = _run("data", "check", str(path), "--report", str(report))
    assert checked.exit_code == 1
    failures = [json.loads(line) for line in report.read_text().splitlines()]
    assert [(f["index"], f["prompt_id"], f["status"]) for f in failures] == [(1, broken.prompt_id, "wrong")]
    dropped = _run("data", "check", str(path), "--drop-failing", "--out", str(tmp_path / "clean.parquet"))
    assert dropped.exit_code == 0, dropped.output
    clean, _ = read_records(tmp_path / "clean.parquet")
    assert [r.prompt_id for r in clean] == [r.prompt_id for r in records if r.prompt_id != broken.prompt_id]


def test_prepare_imports_a_verl_file(tmp_path):
    ours = tmp_path / "ours.parquet"
    _run("data", "generate", "math", "--count", "20", "--level", "2", "--out", str(ours))
    again = tmp_path / "again.parquet"
    result = _run("data", "prepare", "verl", "--data-files", str(ours), "--out", str(again))
    assert result.exit_code == 0, result.output
    assert [r.model_dump() for r in read_records(again)[0]] == [
        r.model_dump() for r in list({r.prompt_id: r for r in read_records(ours)[0]}.values())]


def test_help_shows_examples():
    for command in ("prepare", "check", "generate", "sources"):
        result = _run("data", command, "--help")
        assert result.exit_code == 0 and "Example:" in result.output
