"""Curriculum strategies inside real training runs (CPU default tiny model, cached warm start, real
verifiers): the loop's phases apply the zero-variance modes, the sampler's policy runs, and every step's
metrics line says what was dropped, refilled, duplicated and skipped; the ledger agrees."""

from __future__ import annotations

import duckdb
import pytest
from scalerl.env.contracts.config_loader import load_config
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.run.log import read_metrics

P, N, STEPS = 8, 8, 5
SHORT = [f"pipeline.max_steps={STEPS}", "pipeline.k=2", f"pipeline.prompts_per_step={P}",
         f"pipeline.samples_per_prompt={N}", "pipeline.max_time_s=null", "validation.enabled=false",
         "checkpoint.every_steps=100", "logging.progress=lines"]
EVERY_SAMPLER_STRATEGY = [
    "curriculum.priority.mode=learnability", "curriculum.skip.mode=greso",
    "curriculum.mixing.mode=learning_progress", "curriculum.bench.last_k=2", "curriculum.bench.hard_at=0.0",
    "curriculum.bench.min_samples=8", "curriculum.readmission.mode=probe",
]

pytestmark = pytest.mark.timeout(2400)


def run(tmp_path, name: str, overrides: list[str]):
    from scalerl.trainer.run.loop import train

    out = tmp_path / name
    train(load_config(TrainConfig, None, SHORT + overrides), out)
    with duckdb.connect(str(out / "ledger.duckdb"), read_only=True) as con:
        per_step = dict(con.execute("SELECT step, count(*) FROM attempts GROUP BY step").fetchall())
    return read_metrics(out / "metrics.jsonl", "step"), per_step


def test_refill_with_every_sampler_strategy(tmp_path):
    steps, per_step = run(tmp_path, "refill", ["curriculum.zero_variance.mode=refill", *EVERY_SAMPLER_STRATEGY])
    assert [r["step"] for r in steps] == list(range(1, STEPS + 1))
    for r in steps:
        refilled = int(r["curriculum/refilled"])
        assert per_step[r["step"]] == (P + refilled) * N, "refilled groups are recorded under their step"
        assert r["curriculum/trained_groups"] <= P and r["curriculum/duplicated"] == 0
        assert r["curriculum/dropped"] == P + refilled - r["curriculum/trained_groups"]
        assert {"curriculum/p_easy", "curriculum/p_hard", "curriculum/weight/math", "curriculum/stage"} <= set(r)
    assert sum(r["curriculum/refilled"] for r in steps) > 0, "the tiny model leaves zero-variance groups to refill"


def test_duplicate_fills_or_skips_each_step(tmp_path):
    steps, per_step = run(tmp_path, "duplicate", ["curriculum.zero_variance.mode=duplicate"])
    for r in steps:
        assert per_step[r["step"]] == P * N
        if r["curriculum/skipped_step"]:
            assert r["curriculum/trained_groups"] == 0 and r["effective_batch_fraction"] == 0
        else:
            assert r["curriculum/trained_groups"] == P
            assert r["curriculum/duplicated"] == r["curriculum/dropped"]


def test_stage_length_budgets_switch_at_the_stage_boundary(tmp_path):
    """Synchronous (k = 0), so step s trains exactly the groups of the sampler's batch s - 1: the first two
    steps were generated under stage 0's 4-token thinking budget, the rest under the run's own 40-48."""
    phrase = len(TrainConfig().length.interruption_phrase)
    stages = ("curriculum.stages=[{until_batch: 2, think_budget_min_tokens: 4, think_budget_max_tokens: 4, "
              "answer_budget_tokens: 4}, {}]")
    steps, _ = run(tmp_path, "stages", ["pipeline.k=0", "pipeline.max_steps=4", stages])
    with duckdb.connect(str(tmp_path / "stages" / "ledger.duckdb"), read_only=True) as con:
        longest = dict(con.execute("SELECT step, max(completion_tokens) FROM attempts GROUP BY step").fetchall())
    assert longest[1] <= 4 + phrase + 4 and longest[2] <= 4 + phrase + 4
    assert max(longest[3], longest[4]) > 4 + phrase + 4, "the run's own budget lets completions grow"
    for r in steps:
        think = {0: 4.0, 1: 48.0}[int(r["curriculum/stage"])]
        assert r["curriculum/budget/think_max"] == think and "curriculum/budget/answer" in r
    assert steps[0]["curriculum/budget/think_max"] == 4.0 and steps[-1]["curriculum/budget/think_max"] == 48.0
    assert steps[0]["length/interrupted_rate"] > steps[-1]["length/interrupted_rate"]
