"""The data layer's one verl import (`prepare_verl`, which the CLI calls), its one held-out splitter, and the
strict reader the trainer uses (`load_record_file`: file, row and field of the first bad row)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scalerl.env.cli import build_app
from scalerl.env.sources.generators import generate
from scalerl.env.sources.prepare import holdout_count, prepare_verl, split_holdout
from scalerl.env.sources.verl import SCHEMA, RecordFileError, load_record_file, read_records, to_verl_row, write_records
from typer.testing import CliRunner


def test_cli_verl_import_is_the_sources_function(tmp_path):
    records = list(generate("math", seed=3, count=60, level=0))
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    write_records(records[:40], a)
    write_records(records[20:], b)  # 20 prompts overlap: the first copy is kept
    expected = prepare_verl([a, b], holdout=7, holdout_seed=5)
    distinct = list({r.prompt_id: r for r in records}.values())
    assert expected.duplicates == len(records[:40]) + len(records[20:]) - len(expected.records) - len(expected.heldout)
    assert len(expected.records) + len(expected.heldout) == len(distinct)
    out = tmp_path / "out.parquet"
    result = CliRunner().invoke(build_app(), ["data", "prepare", "verl", "--data-files", str(a), "--data-files",
                                              str(b), "--holdout", "7", "--holdout-seed", "5", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert [r.prompt_id for r in read_records(out)[0]] == [r.prompt_id for r in expected.records]
    held = read_records(tmp_path / "out.heldout.parquet")[0]
    assert [r.prompt_id for r in held] == [r.prompt_id for r in expected.heldout]
    assert f"{expected.duplicates} duplicate" in result.output


def test_split_is_independent_of_row_order():
    records = list({r.prompt_id: r for r in generate("code", seed=1, count=200, level=0)}.values())
    n = holdout_count(len(records), 0.25, 10)
    assert n == 10 and holdout_count(3, 0.1, 10) == 1
    _, held = split_holdout(records, n, seed=2)
    _, held_rev = split_holdout(records[::-1], n, seed=2)
    assert {r.prompt_id for r in held} == {r.prompt_id for r in held_rev} and len(held) == n


def _write_rows(path, rows):
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)


def _rows(domain):
    return [to_verl_row(r, i) for i, r in enumerate(generate(domain, seed=0, count=3, level=0))]


def _missing_answer(rows):
    rows[1]["extra_info"]["answer"] = None


def _code_without_tests(rows):
    rows[2]["extra_info"]["tests"] = None


def _unknown_domain(rows):
    rows[1]["ability"] = "chemistry"


@pytest.mark.parametrize("domain, break_row, row, field", [
    ("math", _missing_answer, 2, "extra_info.answer"),
    ("code", _code_without_tests, 3, "extra_info.tests"),
    ("math", _unknown_domain, 2, "ability"),
])
def test_strict_reader_names_file_row_and_field(tmp_path, domain, break_row, row, field):
    rows = _rows(domain)
    path = tmp_path / f"{domain}.parquet"
    _write_rows(path, rows)
    assert len(load_record_file(path, domain)) == 3
    break_row(rows)
    _write_rows(path, rows)
    with pytest.raises(RecordFileError) as info:
        load_record_file(path, domain)
    assert (info.value.path, info.value.row, info.value.field) == (str(path), row, field)
    assert str(path) in str(info.value) and f"row {row}" in str(info.value)


def test_strict_reader_rejects_unreadable_parquet_and_wrong_domain(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(RecordFileError, match="not a readable parquet") as info:
        load_record_file(bad)
    assert info.value.row == 0
    path = tmp_path / "code.parquet"
    _write_rows(path, _rows("code"))
    with pytest.raises(RecordFileError, match="a code problem in a math source") as info:
        load_record_file(path, "math")
    assert (info.value.row, info.value.field) == (1, "ability")
