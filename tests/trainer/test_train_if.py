"""`scalerl train --domains math,code,if --max-steps 5` on the CPU default tiny model (real verifiers, real
ledger): every step trains groups of the three domains and logs per-domain metrics; validation and the
ledger name the `if` domain. Kept short: no warm start, few prompts and samples, small validation."""

from __future__ import annotations

import json

import duckdb
import pytest
from scalerl.trainer.cli import build_app
from scalerl.trainer.run.log import read_metrics
from typer.testing import CliRunner

pytestmark = pytest.mark.timeout(600)

DOMAINS = ["math", "code", "if"]


def test_five_steps_on_three_domains(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(build_app(), [
        "train", "--domains", ",".join(DOMAINS), "--max-steps", "5", "--out", str(out),
        "warm_start.enabled=false", "pipeline.prompts_per_step=6", "pipeline.samples_per_prompt=4",
        "pipeline.k=0",  # synchronous: each step trains the groups drawn for it, of every domain
        "pipeline.max_time_s=null", "validation.min_evaluations_per_domain=8", "data.holdout_max_prompts=8",
        "validation.fit_at_end=false", "logging.progress=lines"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    steps = read_metrics(out / "metrics.jsonl", "step")
    assert [s["step"] for s in steps] == [1, 2, 3, 4, 5]
    for name in ("reward", "pass_rate", "groups", "format_failure_rate"):
        assert all(f"{name}/if" in s for s in steps), name
    assert sum(s["groups/if"] for s in steps) >= 5
    validation = read_metrics(out / "metrics.jsonl", "validation")
    assert validation and all(set(v["val"]) == set(DOMAINS) for v in validation)
    with duckdb.connect(str(out / "ledger.duckdb"), read_only=True) as db:
        rows = db.execute("SELECT domain, count(*), count(DISTINCT status) FROM attempts GROUP BY domain").fetchall()
        statuses = {s for (s,) in db.execute("SELECT DISTINCT status FROM attempts WHERE domain = 'if'").fetchall()}
    assert {d for d, _, _ in rows} == set(DOMAINS)
    assert statuses <= {"correct", "wrong", "no_answer"} and "error" not in statuses
    config = (out / "config.yaml").read_text()
    assert "  if:\n" in config  # the if prompt section of the run is in its resolved config
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["heldout_pass_rate"]) == set(DOMAINS)
