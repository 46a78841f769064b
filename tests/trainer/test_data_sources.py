"""The trainer's data path without a model: sources, held-out sets (the data layer's splitter), presets,
`--data` / `--heldout` / `--dry-run`, malformed files stopping the run before the model loads, long
prompts skipped, and the rollout log's format watch."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from scalerl.env.contracts.config_loader import ConfigError, load_config
from scalerl.env.contracts.records import Verdict
from scalerl.env.sources.generators import generate
from scalerl.env.sources.prepare import holdout_count, split_holdout
from scalerl.env.sources.verl import write_records
from scalerl.trainer.cli import build_app
from scalerl.trainer.config.presets import PRESETS, preset_values
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.run.data_sources import DataFileError, build_data, domain_weights
from typer.testing import CliRunner


def _files(tmp_path):
    math = list({r.prompt_id: r for r in generate("math", seed=1, count=160, level=0)}.values())[:120]
    code = list(generate("code", seed=1, count=60, level=0))
    paths = {"math": tmp_path / "math.parquet", "math_b": tmp_path / "math_b.parquet",
             "code": tmp_path / "code.parquet", "held": tmp_path / "math.heldout.parquet"}
    write_records(math[:80], paths["math"])
    write_records(math[60:], paths["math_b"])  # overlaps the first file: first copy kept
    write_records(code, paths["code"])
    write_records(math[:5], paths["held"])
    return paths


def _cfg(*overrides, preset=None):
    return load_config(TrainConfig, None, list(overrides), base=preset_values(preset))


def test_generator_split_is_the_data_layers_splitter():
    cfg = _cfg("data.generated_per_domain=400", "data.holdout_fraction=0.2", "data.holdout_max_prompts=30")
    pools = build_data(cfg)
    for domain, pool in pools.items():
        distinct = list({r.prompt_id: r for r in generate(domain, seed=0, count=400, level=0)}.values())
        _, expected = split_holdout(distinct, holdout_count(len(distinct), 0.2, 30), seed=0)
        assert [r.prompt_id for r in pool.holdout] == [r.prompt_id for r in expected]
        assert not {r.prompt_id for r in pool.train} & {r.prompt_id for r in pool.holdout}


def test_file_sources_heldout_files_and_weights(tmp_path):
    p = _files(tmp_path)
    cfg = _cfg(f"data.sources=[{{domain: math, files: [{p['math']}, {p['math_b']}], weight: 2}},"
               f" {{domain: code, files: [{p['code']}], weight: 0.5}}]", f"data.heldout={{math: [{p['held']}]}}")
    pools = build_data(cfg)
    held = {r.prompt_id for r in pools["math"].holdout}
    assert len(held) == 5 and not held & {r.prompt_id for r in pools["math"].train}
    math_ids = list(dict.fromkeys(r.prompt_id for r in generate("math", seed=1, count=160, level=0)))[:120]
    assert [r.prompt_id for r in pools["math"].train] == [i for i in math_ids if i not in held]
    assert len(pools["code"].holdout) == holdout_count(len(set(r.prompt_id for r in generate(
        "code", seed=1, count=60, level=0))), cfg.data.holdout_fraction, cfg.data.holdout_max_prompts)
    assert domain_weights(cfg) == {"math": 2.0, "code": 0.5}


def test_sources_must_cover_the_trained_domains(tmp_path):
    p = _files(tmp_path)
    with pytest.raises(ConfigError, match=r"domains \['code'\] are trained but data.sources has none"):
        build_data(_cfg(f"data.sources=[{{domain: math, files: [{p['math']}]}}]"))


def test_preset_sits_between_defaults_and_file(tmp_path):
    yaml = tmp_path / "run.yaml"
    yaml.write_text("optim: {lr: 3.0e-6}\npipeline: {k: 3}\n")
    cfg = load_config(TrainConfig, yaml, ["pipeline.k=5"], base=preset_values("small-cpu"))
    assert cfg.optim.lr == 3e-6 and cfg.pipeline.k == 5  # file over preset, override over file
    small = PRESETS["small-cpu"]  # the preset's own values (not the class defaults) reach the config
    assert (cfg.model, cfg.length.think_budget_max_tokens, cfg.data.level) == (
        small["model"], small["length"]["think_budget_max_tokens"], small["data"]["level"])
    assert (cfg.length.think_budget_max_tokens, cfg.data.level) != (
        TrainConfig().length.think_budget_max_tokens, TrainConfig().data.level)
    paper = _cfg(preset="paper")
    assert (paper.pipeline.prompts_per_step, paper.pipeline.samples_per_prompt, paper.optim.lr,
            paper.optim.warmup_steps, paper.optim.eps, paper.optim.weight_decay, paper.pipeline.k,
            paper.engine.dtype) == (48, 16, 5e-7, 100, 1e-15, 0.01, 8, "bfloat16")
    assert (paper.length.think_budget_min_tokens, paper.length.think_budget_max_tokens,
            paper.length.answer_budget_tokens) == (10_000, 12_000, 2_000)
    assert _cfg(preset="tiny-cpu") == TrainConfig()
    with pytest.raises(ConfigError, match="known presets"):
        preset_values("huge")


def test_malformed_file_stops_the_run_before_the_model_loads(tmp_path, monkeypatch):
    import scalerl.trainer.run.setup as run_setup
    from scalerl.trainer.run.loop import train

    p = _files(tmp_path)
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    monkeypatch.setattr(run_setup, "load_policy", lambda *a: pytest.fail("the model was loaded"))
    cfg = _cfg(f"data.sources=[{{domain: math, files: [{p['math']}]}}, {{domain: code, files: [{bad}]}}]")
    with pytest.raises(DataFileError) as info:
        train(cfg, tmp_path / "run")
    assert (info.value.path, info.value.row, info.value.field) == (str(bad), 0, "(file)")
    result = CliRunner().invoke(build_app(), ["train", "--data", f"math={p['math']}", "--data", f"code={p['math']}",
                                              "--out", str(tmp_path / "run2")])
    assert result.exit_code == 2 and "row 1, field ability: a math problem in a code source" in result.output


def test_cli_data_flags_and_dry_run(tmp_path):
    p = _files(tmp_path)
    args = ["train", "--data", f"math={p['math']},{p['math_b']}", "--heldout", f"math={p['held']}", "--dry-run"]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output
    assert "math: 115 training, 5 held-out problems; prompt tokens p50" in result.output
    assert "code" not in result.output.split("per step")[0].split("sources:")[1]  # --data math only
    assert "per step: 16 prompts x 8 samples = 128 samples" in result.output
    bad = CliRunner().invoke(build_app(), ["train", "--data", f"chemistry={p['math']}", "--dry-run"])
    assert bad.exit_code == 2 and "unknown domain 'chemistry'" in bad.output


def test_too_long_prompts_are_skipped_and_counted():
    from scalerl.trainer.rollout.prompts import completion_budget, prepare_prompts
    from scalerl.trainer.tiny.model import CharTokenizer

    cfg = _cfg("data.generated_per_domain=300", "engine.max_seq_len=120")
    codec, pools, skipped = prepare_prompts(cfg, CharTokenizer(), build_data(cfg))
    budget = completion_budget(cfg, codec)
    assert skipped["math"] == 0 and skipped["code"] > 0
    assert all(len(codec.encode_problem(r)) + budget <= 120 for r in pools["code"].train + pools["code"].holdout)


def _group(domain, statuses, truncated):
    samples = [SimpleNamespace(policy_versions=[0, 1], truncated=truncated, finish_reason="length" if truncated
                               else "stop", token_ids=[1, 2, 3]) for _ in statuses]
    return SimpleNamespace(domain=domain, problem=SimpleNamespace(prompt_id=f"{domain}-1", domain=domain),
                           samples=samples, completions=["x"] * len(statuses),
                           verdicts=[Verdict.of(s) for s in statuses])


def test_rollout_log_bounds_lines_and_names_the_likely_cause(tmp_path, caplog):
    import json

    from scalerl.trainer.config.data import RolloutLogConfig
    from scalerl.trainer.rollout.sample_log import RolloutLog

    log = RolloutLog(tmp_path, RolloutLogConfig(samples_per_step=3, warn_after_steps=2), skipped={"math": 4})
    caplog.set_level(logging.WARNING)
    for step in (1, 2, 3):
        metrics = log.observe_step(step, [_group("math", ["no_answer"] * 4, truncated=True),
                                          _group("code", ["unparsable", "correct"] * 2, truncated=False)])
    assert metrics["format_failure_rate/math"] == 1.0 and metrics["data/skipped_long_prompts/math"] == 4
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("math:") and "the budget" in warnings[0]
    lines = [json.loads(x) for x in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert len(lines) == 9 and [r["domain"] for r in lines[:3]] == ["math", "code", "math"]


def test_tiny_model_trains_on_prepared_real_files(tmp_path):
    """The built-in model (no warm start: it has never seen GSM8K) through 2 steps on GSM8K + MBPP prepared
    by the data layer: ledger rows of both domains with the files' ids; prompts too long are counted."""
    import duckdb
    from scalerl.env.sources.verl import read_records
    from scalerl.trainer.run.log import read_metrics

    from tests.support.real_model import prepared_files

    files = prepared_files(tmp_path, limit=30)
    out = tmp_path / "run"
    result = CliRunner().invoke(build_app(), [
        "train", "--data", f"math={files['math']}", "--data", f"code={files['code']}", "--max-steps", "2",
        "--out", str(out), "warm_start.enabled=false", "engine.max_seq_len=600", "tiny.max_position_embeddings=1024",
        "pipeline.prompts_per_step=2", "pipeline.samples_per_prompt=2", "pipeline.max_time_s=null",
        "pipeline.k=0",  # synchronous: each step trains the groups drawn for it (math, code), however slow code is
        "validation.min_evaluations_per_domain=2", "data.holdout_max_prompts=2", "logging.progress=lines"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    ids = {d: {r.prompt_id for r in read_records(p)[0]} for d, p in files.items()}
    with duckdb.connect(str(out / "ledger.duckdb"), read_only=True) as db:
        rows = db.execute("SELECT prompt_id, domain FROM attempts").fetchall()
    assert {d for _, d in rows} == {"math", "code"} and all(p in ids[d] for p, d in rows)
    step = read_metrics(out / "metrics.jsonl", "step")[-1]
    assert step["data/skipped_long_prompts/code"] > 0  # MBPP prompts with their tests exceed 600 characters
