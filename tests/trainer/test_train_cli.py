"""`scalerl train` fails fast, with exit code 2 and a message naming the problem, on bad configurations;
`--dry-run` exits 2 when the memory plan does not fit and says when it cannot measure prompts; a run says
which limit ended it and what its step line means."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from scalerl.env.contracts.paths import DATASETS
from scalerl.trainer.cli import build_app
from scalerl.trainer.run.dry_run import EXAMPLE_CHARS, example_line
from typer.testing import CliRunner

runner = CliRunner()


@pytest.mark.parametrize("args,message", [
    (["--domains", "math,chem"], "unknown domain(s) or environment(s) ['chem']; domains: ['math'"),
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


def test_help_shows_an_example_and_names_every_domain():
    result = CliRunner(env={"COLUMNS": "200"}).invoke(build_app(), ["train", "--help"])
    assert result.exit_code == 0 and "scalerl train --domains math,code" in result.output
    assert "of: math,code,if (default math,code)" in result.output  # the if domain is found from --help


SHAPE = DATASETS / "model_shapes" / "smollm2-135m" / "config.json"


def _config_only_folder(tmp_path: Path, *extra: tuple[str, str]) -> Path:
    """A model folder holding only `config.json` (enough for the memory plan), plus `extra` files."""
    folder = tmp_path / "shape"
    folder.mkdir()
    shutil.copy(SHAPE, folder / "config.json")
    for name, text in extra:
        (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize("memory,code,verdict", [("1GiB", 2, "DOES NOT FIT"), ("80GiB", 0, " fits")])
def test_dry_run_exits_2_when_the_memory_plan_does_not_fit(tmp_path, memory, code, verdict):
    folder = _config_only_folder(tmp_path)
    result = runner.invoke(build_app(), ["train", "--model", str(folder), "--dry-run", "--device-memory", memory,
                                         "data.generated_per_domain=50"])
    assert result.exit_code == code, result.output
    assert verdict in result.output
    assert ("error: the memory plan does not fit" in result.output) == (code == 2)


@pytest.mark.parametrize("extra,reason", [
    ((), "no tokenizer in"),
    ((("tokenizer_config.json", "{}"),), "cannot be loaded"),
])
def test_dry_run_without_a_tokenizer_says_the_prompt_statistics_were_skipped(tmp_path, extra, reason):
    folder = _config_only_folder(tmp_path, *extra)
    result = runner.invoke(build_app(), ["train", "--model", str(folder), "--dry-run", "--device-memory", "80GiB",
                                         "data.generated_per_domain=50"])
    assert result.exit_code == 0, result.output
    assert "prompt statistics skipped: " in result.output and reason in result.output
    assert "prompt tokens" not in result.output and "example prompt" not in result.output
    assert "code: " in result.output and "held-out problems" in result.output  # the counts still show
    assert "memory plan" in result.output


def test_a_long_example_prompt_marks_the_cut():
    text = "<|im_start|>system\n" + "x" * 1000 + "<|im_start|>assistant\n"
    line = example_line(text)
    assert line.startswith(f"example prompt (last {EXAMPLE_CHARS} of {len(text)} characters): '…")
    assert line.endswith(repr(text[-EXAMPLE_CHARS:])[1:])
    assert example_line("2+2=") == "example prompt: '2+2='"  # a short one shows whole, with nothing cut


@pytest.mark.timeout(600)
def test_a_run_ended_by_the_time_limit_says_so_and_explains_its_step_line(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="scalerl.trainer.run.log")
    out = tmp_path / "run"
    result = runner.invoke(build_app(), [
        "train", "--domains", "math", "--max-steps", "400", "--out", str(out), "pipeline.max_time_s=1",
        "warm_start.enabled=false", "validation.enabled=false", "data.generated_per_domain=60",
        "pipeline.prompts_per_step=2", "pipeline.samples_per_prompt=2", "logging.progress=lines"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_by"] == "max_time_s" and summary["steps"] < 400
    assert "stopped by the time limit (pipeline.max_time_s)" in result.output
    assert f"stopped at step {summary['steps']} of at most 400: the time limit" in caplog.text
    legend = caplog.text[caplog.text.index("step line:"):]
    assert "lag≤L: the largest lag" in legend and "eff=F: effective batch fraction" in legend
    assert "pipeline.max_steps=400 or pipeline.max_time_s=1 s of RL, whichever comes first" in legend
