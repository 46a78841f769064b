"""Problem records ↔ parquet in the verl schema (the one the RL ecosystem exchanges).

Columns: `data_source` (source name), `prompt` (list of {role, content}), `ability` (domain),
`reward_model` {style: "rule", ground_truth}, `extra_info` {prompt_id, index, answer, tests,
difficulty_prior, metadata}. `ground_truth` is the math answer, or for code our test object as JSON
(verl's own `prime_code` scorer expects `{"inputs", "outputs"}` instead: score such files through
`scalerl-env serve`). `tests` and `metadata` are JSON strings so every row has one schema.

Guarantees: `read_records(write_records(rs))` gives back `rs` exactly; writes are atomic (temp file,
then rename). Foreign verl files (e.g. verl's own `examples/data_preprocess/gsm8k.py` output) import:
the domain comes from `ability`, the answer from `ground_truth`, `{"inputs", "outputs"}` code tests go
through the APPS converter (`scalerl.verifiers.code.converters`), and the
id is recomputed from source + the last user message.
Rows that do not import are reported (`RowError`), never fatal.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import TypeAdapter, ValidationError
from scalerl.env.contracts.domains import domain_for_ability, domain_names
from scalerl.env.contracts.records import CodeTests, ProblemRecord, make_prompt_id

from .loading import RowError

_TESTS = TypeAdapter(CodeTests)

SCHEMA = pa.schema([
    ("data_source", pa.string()),
    ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ("ability", pa.string()),
    ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
    ("extra_info", pa.struct([
        ("prompt_id", pa.string()), ("index", pa.int64()), ("answer", pa.string()),
        ("tests", pa.string()), ("difficulty_prior", pa.float64()), ("metadata", pa.string()),
    ])),
])


def to_verl_row(record: ProblemRecord, index: int) -> dict[str, Any]:
    tests = record.tests.model_dump_json() if record.tests is not None else None
    return {
        "data_source": record.source,
        "prompt": [m.model_dump() for m in record.prompt],
        "ability": record.domain,
        "reward_model": {"style": "rule", "ground_truth": tests if record.tests is not None else record.answer},
        "extra_info": {
            "prompt_id": record.prompt_id, "index": index, "answer": record.answer, "tests": tests,
            "difficulty_prior": record.difficulty_prior,
            "metadata": json.dumps(record.metadata, ensure_ascii=False, default=str),
        },
    }


def write_records(records: Iterable[ProblemRecord], path: str | Path) -> int:
    """Write `records` to `path` atomically; returns the number written."""
    rows = [to_verl_row(r, i) for i, r in enumerate(records)]
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return len(rows)


def read_records(path: str | Path) -> tuple[list[ProblemRecord], list[RowError]]:
    """Records in a verl parquet file (ours or foreign), and the rows that did not import."""
    rows = pq.read_table(path).to_pylist()
    records, errors = [], []
    for number, row in enumerate(rows, start=1):
        try:
            records.append(from_verl_row(row))
        except (ValueError, TypeError, KeyError, ValidationError) as exc:
            source = str(row.get("data_source") or "?")
            errors.append(RowError(source, str(path), number, f"{exc.__class__.__name__}: {exc}"))
    return records, errors


def from_verl_row(row: dict[str, Any]) -> ProblemRecord:
    extra = row.get("extra_info") or {}
    prompt = row.get("prompt")
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    if not prompt:
        raise ValueError("empty 'prompt'")
    if extra.get("prompt_id"):  # written by write_records
        tests = _TESTS.validate_json(extra["tests"]) if extra.get("tests") else None
        return ProblemRecord(
            prompt_id=extra["prompt_id"], domain=row["ability"], source=row["data_source"], prompt=prompt,
            answer=extra.get("answer"), tests=tests, difficulty_prior=extra.get("difficulty_prior"),
            metadata=json.loads(extra.get("metadata") or "{}"),
        )
    return _foreign(row, prompt, extra)


def _foreign(row: dict[str, Any], prompt: list[dict], extra: dict[str, Any]) -> ProblemRecord:
    source = str(row.get("data_source") or "verl")
    spec = domain_for_ability(str(row.get("ability") or "math"))
    if spec is None:
        raise ValueError(f"'ability' {row.get('ability')!r} names no installed domain ({', '.join(domain_names())})")
    domain = spec.name
    truth = (row.get("reward_model") or {}).get("ground_truth")
    if isinstance(truth, list) and truth:
        truth = truth[0]
    if truth is None or truth == "":
        raise ValueError("missing 'reward_model.ground_truth'")
    answer, tests = (str(truth), None) if spec.reference == "answer" else (None, _foreign_tests(truth))
    user = [m["content"] for m in prompt if m.get("role") == "user"] or [prompt[-1]["content"]]
    keep = {k: v for k, v in extra.items() if isinstance(v, (str, int, float, bool))}
    return ProblemRecord(
        prompt_id=make_prompt_id(source, user[-1]), domain=domain, source=source,
        prompt=[{"role": m["role"], "content": m["content"]} for m in prompt],
        answer=answer, tests=tests, metadata={"verl_extra_info": keep},
    )


def _foreign_tests(truth: Any):
    data = json.loads(truth) if isinstance(truth, str) else truth
    if isinstance(data, dict) and "kind" in data:
        return _TESTS.validate_python(data)
    from scalerl.verifiers.code.converters import from_apps

    return from_apps({"input_output": json.dumps(data)})


class RecordFileError(ValueError):
    """A problem file that must not be trained on: names the file, the 1-based row and the field at fault."""

    def __init__(self, path: str | Path, row: int, field: str, message: str) -> None:
        self.path, self.row, self.field = str(path), row, field
        super().__init__(f"{path} row {row}, field {field}: {message}")


_FIELDS = {"answer": "extra_info.answer", "tests": "extra_info.tests", "domain": "ability", "prompt": "prompt",
           "prompt_id": "extra_info.prompt_id", "source": "data_source"}


def load_record_file(path: str | Path, domain: str | None = None) -> list[ProblemRecord]:
    """Every record of a verl parquet file, or `RecordFileError` at the first row that does not import
    (missing answer, code without tests, unknown `ability`, a domain other than `domain`) or when the
    file is not a readable parquet. For training, where a skipped row would silently shrink the data;
    `read_records` is the lenient reader that reports bad rows and goes on."""
    path = Path(path)
    if not path.is_file():
        raise RecordFileError(path, 0, "(file)", "no such file")
    try:
        rows = pq.read_table(path).to_pylist()
    except (OSError, pa.ArrowException) as exc:
        raise RecordFileError(path, 0, "(file)", f"not a readable parquet file ({exc})") from None
    records = []
    for number, row in enumerate(rows, start=1):
        ability = str(row.get("ability") or "")
        if domain_for_ability(ability) is None:
            raise RecordFileError(path, number, "ability",
                                  f"unknown domain {ability!r} (expected one of {', '.join(domain_names())})")
        try:
            record = from_verl_row(row)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = _FIELDS.get(str(err["loc"][0]) if err["loc"] else "", "")
            if not field:  # the record-level rule: math needs an answer, code needs tests
                field = "extra_info.tests" if "tests" in err["msg"] else "extra_info.answer"
            raise RecordFileError(path, number, field, err["msg"]) from None
        except (ValueError, TypeError, KeyError) as exc:
            field = "reward_model.ground_truth" if "ground_truth" in str(exc) else "prompt"
            raise RecordFileError(path, number, field, f"{exc.__class__.__name__}: {exc}") from None
        if domain is not None and record.domain != domain:
            raise RecordFileError(path, number, "ability", f"a {record.domain} problem in a {domain} source")
        records.append(record)
    return records
