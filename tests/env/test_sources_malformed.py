"""Malformed rows are reported with source and row number and never crash a prepare run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scalerl.env.cli import build_app
from scalerl.env.sources.manifest import load_manifest
from scalerl.env.sources.prepare import prepare
from typer.testing import CliRunner

GOOD = {"problem": "What is $1+1$?", "answer": "2", "difficulty": "4/8"}


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_bad_json_line_is_reported_with_its_line_number(tmp_path):
    path = _write(tmp_path / "p.jsonl", [json.dumps(GOOD), '{"problem": "truncated', json.dumps(
        GOOD | {"problem": "What is $2+2$?", "answer": "4"})])
    result = prepare(load_manifest("polaris"), files=[path])
    assert [r.answer for r in result.records] == ["2", "4"]
    assert len(result.errors) == 1
    error = result.errors[0]
    assert (error.source, error.row) == ("polaris", 2) and "invalid JSON" in error.message
    assert str(path) in str(error)


def test_type_change_between_rows_falls_back_to_line_reading(tmp_path):
    """`datasets` rejects a file whose column changes type; its good rows still come through."""
    path = _write(tmp_path / "p.jsonl", [json.dumps(GOOD), json.dumps(GOOD | {"problem": ["not", "text"]}),
                                        json.dumps(GOOD | {"problem": "What is $3+3$?", "answer": "6"})])
    result = prepare(load_manifest("polaris"), files=[path])
    assert [r.answer for r in result.records] == ["2", "6"]
    assert [(e.row, "problem" in e.message) for e in result.errors] == [(2, True)]


def test_missing_column_and_bad_values_name_the_field(tmp_path):
    rows = [
        GOOD,
        {k: v for k, v in GOOD.items() if k != "answer"} | {"problem": "No answer here?"},
        GOOD | {"problem": "Bad difficulty?", "difficulty": "9/8"},
        GOOD | {"problem": "   "},
    ]
    path = _write(tmp_path / "p.jsonl", [json.dumps(r) for r in rows])
    result = prepare(load_manifest("polaris"), files=[path])
    assert len(result.records) == 1
    messages = {e.row: e.message for e in result.errors}
    assert set(messages) == {2, 3, 4}
    assert "answer" in messages[2]
    assert "pass rate" in messages[3]
    assert "problem" in messages[4]


def test_gsm8k_row_without_hash_answer_is_reported(tmp_path):
    rows = [{"question": "Q1?", "answer": "so 3\n#### 3"}, {"question": "Q2?", "answer": "no final line"}]
    path = _write(tmp_path / "g.jsonl", [json.dumps(r) for r in rows])
    result = prepare(load_manifest("gsm8k"), files=[path])
    assert [r.answer for r in result.records] == ["3"]
    assert result.errors[0].row == 2 and "####" in result.errors[0].message


def test_cli_prepare_survives_bad_rows_and_lists_them(tmp_path):
    path = _write(tmp_path / "p.jsonl", [json.dumps(GOOD), "not json at all", json.dumps({"answer": "1"})])
    out, errors = tmp_path / "out.parquet", tmp_path / "errors.jsonl"
    result = CliRunner().invoke(build_app(), ["data", "prepare", "polaris", "--data-files", str(path),
                                              "--out", str(out), "--errors", str(errors)])
    assert result.exit_code == 0, result.output
    assert "1 records" in result.output and "2 skipped" in result.output
    reported = [json.loads(line) for line in errors.read_text().splitlines()]
    assert [(r["source"], r["row"]) for r in reported] == [("polaris", 2), ("polaris", 3)]
    assert out.is_file()


def test_cli_reports_unknown_source_and_missing_file(tmp_path):
    runner = CliRunner()
    unknown = runner.invoke(build_app(), ["data", "prepare", "nosuch", "--out", str(tmp_path / "o.parquet")])
    assert unknown.exit_code == 2 and "unknown source" in unknown.output
    missing = runner.invoke(build_app(), ["data", "prepare", "gsm8k", "--data-files", str(tmp_path / "x.jsonl"),
                                          "--out", str(tmp_path / "o.parquet")])
    assert missing.exit_code == 2 and "no such file" in missing.output


def test_hub_config_that_fails_is_reported_and_the_others_load(tmp_path):
    """A dataset directory loads like a hub name; a config it lacks is skipped and reported, not fatal."""
    from scalerl.env.sources.loading import DataLoadError

    repo = tmp_path / "fake_hub_dataset"
    repo.mkdir()
    _write(repo / "train.jsonl", [json.dumps(GOOD)])
    manifest = load_manifest("polaris").model_copy(
        update={"hub": load_manifest("polaris").hub.model_copy(update={"path": str(repo), "configs": [None, "nope"]})})
    result = prepare(manifest)
    assert [r.answer for r in result.records] == ["2"]
    assert len(result.errors) == 1 and "nope" in result.errors[0].origin
    missing = manifest.model_copy(update={"hub": manifest.hub.model_copy(update={"path": str(tmp_path / "none")})})
    with pytest.raises(DataLoadError):
        prepare(missing)
