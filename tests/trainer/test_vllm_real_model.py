"""The real-model run of tests/trainer/test_real_model.py through the vLLM engine (CPU build, .venv-vllm):
SmolLM2-135M-Instruct on GSM8K + MBPP prepared by the data layer, 2 steps with short budgets; weights pushed
in flight into vLLM; both domains reach metrics, ledger and rollouts.jsonl with the files' prompt ids."""

from __future__ import annotations

import json

import duckdb
import pytest

pytest.importorskip("vllm", reason="the vLLM tests run in .venv-vllm (make test-vllm)")

from scalerl.env.sources.verl import read_records
from scalerl.trainer.cli import build_app
from scalerl.trainer.run.log import read_metrics
from typer.testing import CliRunner

from tests.support.real_model import prepared_files, require_model
from tests.trainer.test_real_model import short_args

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1200)]


def test_vllm_engine_trains_the_real_model_on_prepared_files(tmp_path):
    require_model()
    files = prepared_files(tmp_path)
    out = tmp_path / "run"
    result = CliRunner().invoke(build_app(), short_args(files, out, engine="vllm"))
    assert result.exit_code == 0, result.output + repr(result.exception)
    ids = {d: {r.prompt_id for r in read_records(p)[0]} for d, p in files.items()}
    steps = read_metrics(out / "metrics.jsonl", "step")
    assert [r["step"] for r in steps] == [1, 2]
    assert {k for r in steps for k in r if k.startswith("reward/")} >= {"reward/math", "reward/code"}
    assert (out / "generator_model" / "config.json").exists()
    with duckdb.connect(str(out / "ledger.duckdb"), read_only=True) as db:
        rows = db.execute("SELECT prompt_id, domain FROM attempts").fetchall()
    assert {d for _, d in rows} == {"math", "code"} and all(p in ids[d] for p, d in rows)
    lines = [json.loads(x) for x in (out / "rollouts.jsonl").read_text().splitlines()]
    assert {r["domain"] for r in lines if r["kind"] == "train"} == {"math", "code"}
    assert any(r["completion"].strip() for r in lines)
    assert not any("<|im_end|>" in r["completion"] for r in lines)
