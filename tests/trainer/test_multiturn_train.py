"""`scalerl train --domains retry-math`: a short run of the CPU default (the shipped warm start) plays math
problems as episodes of the scripted `retry-math` environment, and writes the turn metrics per step."""

from __future__ import annotations

import json

import duckdb
import pytest
from scalerl.trainer.cli import build_app
from scalerl.trainer.run.log import read_metrics
from typer.testing import CliRunner

from tests.support import scripted_env
from tests.support.scripted_env import NAME


@pytest.mark.timeout(600)
def test_a_short_run_plays_episodes_and_logs_turn_metrics(tmp_path, monkeypatch):
    scripted_env.install(monkeypatch)
    out = tmp_path / "run"
    result = CliRunner().invoke(build_app(), [
        "train", "--domains", NAME, "--max-steps", "3", "--out", str(out), "validation.enabled=false",
        "pipeline.prompts_per_step=2", "pipeline.samples_per_prompt=4", "pipeline.k=1", "logging.progress=lines",
        "length.mode=none", "engine.max_new_tokens=48", "ledger.store_completions=true",
        "warm_start.episodes.enabled=false"])  # the mechanics, not the protocol: the shipped start alone
    assert result.exit_code == 0, result.output + repr(result.exception)
    steps = read_metrics(out / "metrics.jsonl", "step")
    assert [s["step"] for s in steps] == [1, 2, 3]
    for s in steps:
        assert s[f"episode/{NAME}/count"] == 2 * 4
        assert 1.0 <= s[f"episode/{NAME}/turns_mean"] <= 3.0
        assert s[f"episode/{NAME}/feedback_turns_mean"] <= s[f"episode/{NAME}/turns_mean"]
        assert s["lag/max"] is None or s["lag/max"] <= 1
    assert max(s[f"episode/{NAME}/turns_max"] for s in steps) >= 2, "no episode took a second turn"
    # the episodes were trained on (a step whose groups all have equal rewards trains nothing: all three
    # steps that way is a chance of well under 1 %), and the compute clock counts sampled tokens only
    assert any(s["tokens/loss"] > 0 for s in steps if "tokens/loss" in s)
    sampled = sum(s[f"episode/{NAME}/sampled_tokens_mean"] * s[f"episode/{NAME}/count"] for s in steps)
    assert steps[-1]["compute_tokens"] == pytest.approx(sampled)
    config = (out / "config.yaml").read_text()
    assert "environments:\n- retry-math" in config and "domains:\n- math" in config
    assert json.loads((out / "summary.json").read_text())["steps"] == 3
    assert scripted_env.OPENED and all(e.closed for e in scripted_env.OPENED)
    with duckdb.connect(str(out / "ledger.duckdb"), read_only=True) as con:  # one attempt per episode
        attempts, turns, most, calls = con.execute(
            "SELECT count(*), count(turns), max(turns), sum(tool_calls) FROM attempts").fetchone()
        texts = [row[0] for row in con.execute("SELECT completion FROM attempts").fetchall()]
    assert attempts == 3 * 2 * 4 and turns == attempts and most >= 2 and calls >= attempts
    # the ledger keeps what each verdict scored, the episode's last action, never the environment's text
    assert len(texts) == attempts and not any(scripted_env.FEEDBACK in t for t in texts)


@pytest.mark.timeout(600)
def test_code_feedback_episodes_train_on_the_tiny_model(tmp_path):
    """The built-in `code-feedback` through the real sandbox: the tiny model's wrong programs get the
    failing visible test back (the observation, loss-masked), and every verdict is the environment's.
    Its first observation does not fit the CPU default's 160-token sequences, so the run widens them."""
    out = tmp_path / "run"
    result = CliRunner().invoke(build_app(), [
        "train", "--domains", "code-feedback", "--max-steps", "2", "--out", str(out), "validation.enabled=false",
        "pipeline.prompts_per_step=2", "pipeline.samples_per_prompt=2", "logging.progress=lines",
        "engine.max_seq_len=500", "episode_limits.max_observation_chars=100", "episode_limits.max_turns=2",
        "length.mode=none", "engine.max_new_tokens=160", "warm_start.episodes.enabled=false"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    steps = read_metrics(out / "metrics.jsonl", "step")
    assert [s["step"] for s in steps] == [1, 2]
    assert all(s["episode/code-feedback/count"] == 4 for s in steps)
    assert all(s["episode/code-feedback/turns_max"] <= 2 for s in steps)
    assert max(s["episode/code-feedback/feedback_turns_mean"] for s in steps) > 0
    rows = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    assert rows and {r["domain"] for r in rows} == {"code"}
    fed_back = [r for r in rows if "\nA: " in r["completion"]]  # an observation, then the next generation prompt
    assert fed_back, "no episode got feedback"
    # each verdict is the environment's (its code verifier ran in the sandbox) or the trainer's cut
    assert all("sandbox" in r["details"] or r["details"].get("episode_end") == "length_budget" for r in rows)
    assert any("sandbox" in r["details"] for r in fed_back)


def test_an_opening_longer_than_the_sequence_stops_the_run_at_setup(tmp_path):
    result = CliRunner().invoke(build_app(), [
        "train", "--domains", "code-feedback", "--max-steps", "1", "--out", str(tmp_path / "run"),
        "validation.enabled=false", "warm_start.enabled=false"])
    assert result.exit_code != 0
    assert "every training code-feedback episode opening is longer than engine.max_seq_len=160" in result.output


def test_the_dry_run_measures_episode_openings():
    """`--dry-run` counts what the run would skip: every training problem, whose episode opening (the
    protocol line included) does not fit 160 tokens beside the budget; held-out prompts stay single-turn."""
    import re

    result = CliRunner().invoke(build_app(), ["train", "--domains", "code-feedback", "--dry-run"])
    assert result.exit_code in (0, 2), result.output
    line = next(t for t in result.output.splitlines() if t.startswith("code: "))
    train, over = re.search(r"(\d+) training", line).group(1), re.search(r"; (\d+) over the budget", line).group(1)
    assert int(over) == int(train) > 0
    assert "You have up to 4 submissions" in result.output  # the example is the episode's first observation
