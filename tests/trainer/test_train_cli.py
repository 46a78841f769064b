"""`scalerl train` fails fast, with exit code 2 and a message naming the problem, on bad configurations."""

from __future__ import annotations

import pytest
from scalerl.trainer.cli import build_app
from typer.testing import CliRunner

runner = CliRunner()


@pytest.mark.parametrize("args,message", [
    (["--domains", "math,chem"], "unknown domain(s) ['chem']"),
    (["pipeline.k=-1"], "k must be >= 0"),
    (["--model", "/nonexistent/model-dir"], "no such folder"),
    (["pipeline.mode=ppo-offpolicy", "pipeline.k=0"], "ppo-offpolicy needs k >= 1"),
    (["loss.nmae=cispo"], "loss.nmae"),
    (["--engine", "tensorrt"], "engine.name"),
])
def test_bad_config_fails_fast_with_a_clear_message(tmp_path, args, message):
    result = runner.invoke(build_app(), ["train", "--out", str(tmp_path / "run"), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "run").exists(), "nothing may be created before the config is valid"


def test_resume_without_a_run_folder_fails_fast(tmp_path):
    result = runner.invoke(build_app(), ["train", "--resume", str(tmp_path)])
    assert result.exit_code == 2 and "no config.yaml" in result.output


def test_help_shows_an_example():
    result = runner.invoke(build_app(), ["train", "--help"])
    assert result.exit_code == 0 and "scalerl train --domains math,code" in result.output
