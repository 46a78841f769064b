"""verl parquet import/export and the held-out split."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
from scalerl.env.contracts.records import make_prompt_id
from scalerl.env.sources.generators import generate
from scalerl.env.sources.manifest import fixture_path, load_manifest
from scalerl.env.sources.prepare import prepare, split_holdout
from scalerl.env.sources.verl import SCHEMA, read_records, write_records


def _mixed_records():
    math = prepare(load_manifest("polaris"), files=[fixture_path(load_manifest("polaris"))]).records
    return math + generate("code", seed=0, count=10, level=3) + generate("math", seed=0, count=5, level=2)


def test_write_then_read_gives_back_the_same_records(tmp_path):
    records = _mixed_records()
    path = tmp_path / "r.parquet"
    assert write_records(records, path) == len(records)
    back, errors = read_records(path)
    assert errors == []
    assert [r.model_dump() for r in back] == [r.model_dump() for r in records]


def test_file_has_the_verl_columns(tmp_path):
    path = tmp_path / "r.parquet"
    write_records(_mixed_records(), path)
    table = pq.read_table(path)
    assert table.schema.equals(SCHEMA)
    row = table.slice(0, 1).to_pylist()[0]
    assert row["ability"] == "math" and row["reward_model"]["style"] == "rule"
    assert row["reward_model"]["ground_truth"] == row["extra_info"]["answer"]
    assert row["prompt"][0]["role"] == "user"


def test_foreign_verl_file_imports(tmp_path):
    """The shape verl's examples/data_preprocess/gsm8k.py writes, with one unusable row."""
    rows = [
        {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "Q one? Let's think"}],
         "ability": "math", "reward_model": {"style": "rule", "ground_truth": "72"},
         "extra_info": {"split": "train", "index": 0, "answer": "rationale #### 72", "question": "Q one?"}},
        {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "Q two?"}],
         "ability": "math", "reward_model": {"style": "rule", "ground_truth": ""},
         "extra_info": {"split": "train", "index": 1, "answer": "", "question": "Q two?"}},
    ]
    path = tmp_path / "verl.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    records, errors = read_records(path)
    assert len(records) == 1 and records[0].answer == "72" and records[0].domain == "math"
    assert records[0].prompt_id == make_prompt_id("openai/gsm8k", "Q one? Let's think")
    assert records[0].metadata["verl_extra_info"]["question"] == "Q one?"
    assert len(errors) == 1 and errors[0].row == 2 and "ground_truth" in errors[0].message


def test_write_is_atomic_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "r.parquet"
    write_records(_mixed_records(), path)
    write_records(_mixed_records()[:3], path)
    assert [p.name for p in tmp_path.iterdir()] == ["r.parquet"]
    assert len(read_records(path)[0]) == 3


def test_holdout_is_deterministic_and_order_independent():
    records = generate("math", seed=0, count=300, level=4)
    records = list({r.prompt_id: r for r in records}.values())
    train, held = split_holdout(records, 50, seed=1)
    assert len(held) == 50 and len(train) == len(records) - 50
    assert not {r.prompt_id for r in train} & {r.prompt_id for r in held}
    shuffled = records[:]
    random.Random(3).shuffle(shuffled)
    _, held_again = split_holdout(shuffled, 50, seed=1)
    assert {r.prompt_id for r in held_again} == {r.prompt_id for r in held}
    _, other_seed = split_holdout(records, 50, seed=2)
    assert {r.prompt_id for r in other_seed} != {r.prompt_id for r in held}
