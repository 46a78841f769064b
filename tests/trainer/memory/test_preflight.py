"""`scalerl.trainer.memory.preflight`: the check before weights load, on folders that hold only a config.json."""

from __future__ import annotations

import shutil

import pytest
from scalerl.env.contracts.config_loader import ConfigError, load_config
from scalerl.trainer.config.presets import preset_values
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.memory.preflight import parse_memory_gib, plan_report, preflight, shapes_dir


def config_only(tmp_path, shape: str):
    shutil.copy(shapes_dir() / shape / "config.json", tmp_path / "config.json")
    return tmp_path


def test_seven_b_on_24_gib_stops_naming_the_largest_term_and_what_shrinks_it(tmp_path):
    folder = config_only(tmp_path, "qwen2.5-7b")
    cfg = load_config(TrainConfig, None, [f"model={folder}", "engine.device_memory_gib=24"],
                      base=preset_values("paper"))
    with pytest.raises(ConfigError) as err:
        preflight(cfg.plan_inputs())
    text = str(err.value)
    assert "needs" in text and "24.00 GiB" in text and "largest term: optimizer states" in text
    assert "to shrink optimizer states: trainer_ranks.count" in text


def test_fitting_plan_passes_and_report_lists_every_term(tmp_path):
    folder = config_only(tmp_path, "smollm2-135m")
    cfg = load_config(TrainConfig, None, [f"model={folder}", "engine.device=cpu", "engine.device_memory_gib=16"],
                      base=preset_values("small-cpu"))
    assert preflight(cfg.plan_inputs()) is not None
    report = plan_report(cfg.plan_inputs())
    for term in ("parameters", "gradients", "optimizer states", "activations", "logits", "generation KV cache",
                 "validation engine"):
        assert term in report


def test_no_plan_for_the_tiny_default_and_nothing_checked_without_capacity():
    cfg = load_config(TrainConfig, None, ["engine.device=cpu"])
    assert preflight(cfg.plan_inputs()) is None and "skipped" in plan_report(cfg.plan_inputs())
    small = load_config(TrainConfig, None, ["engine.device=cpu"], base=preset_values("small-cpu"))
    assert "nothing checked" in plan_report(small.plan_inputs())  # CPU, no engine.device_memory_gib


@pytest.mark.parametrize(("text", "gib"), [("80GiB", 80.0), ("24 gib", 24.0), ("512MiB", 0.5), ("16", 16.0)])
def test_parse_memory(text, gib):
    assert parse_memory_gib(text) == pytest.approx(gib)


@pytest.mark.parametrize("text", ["lots", "-3GiB", "GiB"])
def test_parse_memory_rejects(text):
    with pytest.raises(ConfigError):
        parse_memory_gib(text)


def test_scalerl_train_stops_before_any_weight_loads_with_exit_2(tmp_path):
    """The command a user runs: a 7B config.json (no weights in the folder) on a 24 GiB GPU."""
    from scalerl.trainer.cli import build_app
    from typer.testing import CliRunner

    (tmp_path / "model").mkdir()
    folder = config_only(tmp_path / "model", "qwen2.5-7b")
    result = CliRunner().invoke(build_app(), ["train", "--preset", "paper", "--model", str(folder),
                                              "--device-memory", "24GiB", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    assert "does not fit" in result.output or "needs" in result.output
    assert "largest term" in result.output and not (tmp_path / "run").exists()
