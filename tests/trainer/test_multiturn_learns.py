"""`scalerl train --domains code-feedback` on the CPU default with the documented settings (docs/environments.md,
Training): after the episode warm start the tiny model follows the protocol (its episodes end by the
environment, not by the length budget, and it answers the feedback), and, in the slow test, it learns."""

from __future__ import annotations

import json

import pytest
from scalerl.trainer.cli import build_app
from scalerl.trainer.run.log import read_metrics
from typer.testing import CliRunner

ENV = "episode/code-feedback"
DOCUMENTED = ["--domains", "code-feedback", "episode_limits.brief=true", "episode_limits.max_turns=2",
              "engine.max_seq_len=256", "engine.max_new_tokens=160", "length.mode=none"]
"""The documented spelling (docs/environments.md, Training: the tiny model on code-feedback)."""


def _train(out, *extra: str) -> list[dict]:
    result = CliRunner().invoke(build_app(), ["train", *DOCUMENTED, "--out", str(out), "logging.progress=lines",
                                              *extra])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return read_metrics(out / "metrics.jsonl", "step")


@pytest.mark.timeout(900)
def test_after_the_episode_warm_start_the_tiny_model_follows_the_protocol(tmp_path, monkeypatch):
    """A smaller episode warm start than the default's (built here, in an empty cache: about a minute), then
    two RL steps: at most 5 % of the episodes are cut by the budget and a wrong first answer is followed by a
    second one in most of the episodes that got feedback."""
    monkeypatch.setenv("SCALERL_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    steps = _train(out, "--max-steps", "2", "validation.enabled=false", "pipeline.prompts_per_step=4",
                   "warm_start.episodes.steps=80", "warm_start.episodes.max_problems=96")
    episodes = sum(s[f"{ENV}/count"] for s in steps)
    assert episodes == 2 * 4 * 8
    assert max(s[f"{ENV}/cut_rate"] for s in steps) <= 0.05
    assert sum(s[f"{ENV}/feedback_turns_mean"] for s in steps) > 0
    rows = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    fed_back = [r for r in rows if r["details"].get("turns") == 2]
    assert fed_back, "no episode got feedback"
    # the second answer is a program again: the tiny model read the feedback line and answered after it
    assert sum("def " in r["completion"].rsplit("\nA: ", 1)[-1] for r in fed_back) >= 0.8 * len(fed_back)
    assert all(not r["truncated"] for r in fed_back)
