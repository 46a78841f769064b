"""The trainer's configuration: one temperature for sampling and scoring, the penalty budget's bound,
and `scalerl train --print-config` (snapshot of the resolved default)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalerl_env.contracts.config import ConfigError, load_config
from trainer.cli import build_app
from trainer.config.train import TrainConfig

SNAPSHOT = Path(__file__).parent / "snapshots" / "default_config.yaml"


def test_setting_one_temperature_sets_both():
    assert load_config(TrainConfig, None, ["engine.temperature=0.7"]).optim.temperature == 0.7
    assert load_config(TrainConfig, None, ["optim.temperature=0.6"]).engine.temperature == 0.6


def test_two_different_temperatures_are_refused():
    with pytest.raises(ConfigError, match="engine.temperature=0.5 and optim.temperature=0.6 differ"):
        load_config(TrainConfig, None, ["optim.temperature=0.6", "engine.temperature=0.5"])


def test_a_penalty_budget_beyond_the_sampling_budget_is_refused():
    with pytest.raises(ConfigError, match="exceeds engine.max_new_tokens"):
        load_config(TrainConfig, None, ["length.mode=penalty", "length.max_response_tokens=100",
                                        "engine.max_new_tokens=64"])


def test_print_config_shows_the_resolved_default_and_exits():
    result = CliRunner().invoke(build_app(), ["train", "--print-config"])
    assert result.exit_code == 0, result.output
    assert result.output == SNAPSHOT.read_text(), (
        "the resolved default changed: if intended, run `scalerl train --print-config > " + str(SNAPSHOT) + "`")


def test_print_config_applies_overrides():
    result = CliRunner().invoke(build_app(), ["train", "--print-config", "pipeline.k=4", "loss.name=dapo"])
    assert result.exit_code == 0 and "  k: 4\n" in result.output and "  name: dapo\n" in result.output
