"""The trainer's configuration: one temperature for sampling and scoring, the penalty budget's bound,
presets as data over the class defaults, and `scalerl train --print-config` (snapshot of the resolved
default; the layer of each value)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from scalerl.env.contracts.config_loader import ConfigError, leaf_paths, load_config
from scalerl.trainer.cli import build_app
from scalerl.trainer.config.presets import PRESETS
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.core.recipe_config import OptimConfig
from typer.testing import CliRunner

SNAPSHOT = Path(__file__).parent / "snapshots" / "default_config.yaml"


def test_temperature_is_one_setting_and_the_old_key_is_refused_naming_it():
    assert "temperature" not in OptimConfig.model_fields
    with pytest.raises(ConfigError, match="optim: .*temperature is gone: the trainer scores at engine.temperature"):
        load_config(TrainConfig, None, ["optim.temperature=0.6"])


def test_the_trainer_scores_at_the_engine_temperature():
    from scalerl.trainer.core.update import PolicyTrainer
    from scalerl.trainer.tiny.model import build_tiny_model

    cfg = load_config(TrainConfig, None, ["engine.temperature=0.7"])
    model = build_tiny_model(cfg.tiny)
    trainer = PolicyTrainer(model, cfg.optim, cfg.loss, temperature=cfg.engine.temperature)
    assert trainer.logprob_model.temperature == 0.7


def test_class_defaults_are_the_run_defaults():
    """One source per default: the section a run gets is the section class's own default."""
    cfg = TrainConfig()
    assert cfg.optim == OptimConfig() and cfg.optim.lr == 1e-4


@pytest.mark.parametrize("name", [n for n, v in PRESETS.items() if v])
def test_a_preset_names_only_what_it_changes(name):
    defaults = dict(leaf_paths(TrainConfig().model_dump(mode="json")))
    same = [".".join(k) for k, v in leaf_paths(PRESETS[name]) if defaults.get(k) == v]
    assert not same, f"preset {name} restates class defaults: {same}"
    load_config(TrainConfig, None, [], base=PRESETS[name])  # and it is a valid configuration


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
    assert result.exit_code == 0, result.output
    assert "  k: 4  # override\n" in result.output and "  name: dapo  # override\n" in result.output


def test_print_config_names_the_layer_of_each_value_and_reads_back(tmp_path):
    yaml_file = tmp_path / "run.yaml"
    yaml_file.write_text("pipeline:\n  k: 3\noptim:\n  lr: 2.0e-6\n")
    result = CliRunner().invoke(build_app(), ["train", "--print-config", "--preset", "paper", "--config",
                                              str(yaml_file), "--max-steps", "7", "optim.lr=3e-6"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"# class defaults, then (each later one wins): preset paper, file {yaml_file}, flag, override"
    assert "  k: 3  # file " + str(yaml_file) in lines
    assert "  max_steps: 7  # flag" in lines
    assert "  lr: 3.0e-06  # override" in lines  # the override beat the file's 2e-6
    assert "  prompts_per_step: 48  # preset paper" in lines
    assert "  mode: pipeline" in lines  # a class default carries no comment
    again = tmp_path / "again.yaml"
    again.write_text(result.output)
    assert load_config(TrainConfig, again) == load_config(TrainConfig, None, [], base=yaml.safe_load(result.output))
    assert load_config(TrainConfig, again).pipeline.k == 3


def test_model_implied_preset_is_named_as_a_layer(tmp_path):
    from scalerl.trainer.config.resolve import RunFlags, resolve_config

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    cfg, layers = resolve_config(flags=RunFlags(model=str(folder)))
    assert layers[0].name == "preset small-cpu (implied by --model)" and cfg.optim.lr == 5e-6
