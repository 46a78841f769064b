"""Per-source mixing weights from the config to the run: source labels, the first-source rule for a
shared prompt id, weights from YAML and from `--data DOMAIN=FILE@WEIGHT`, errors naming the field, the
`draws/<domain>/<source>` metrics and `rollouts.jsonl` sources of a real (tiny-model) run; and `--model`
alone on cpu taking `--preset small-cpu`'s values."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from scalerl.env.contracts.config_loader import ConfigError, load_config
from scalerl.env.sources.generators import generate
from scalerl.env.sources.verl import write_records
from scalerl.trainer.cli import build_app
from scalerl.trainer.config.data_flags import data_overrides
from scalerl.trainer.config.presets import preset_values
from scalerl.trainer.config.resolve import RunFlags, resolve_config
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.run.data_sources import build_data, domain_weights, source_labels
from typer.testing import CliRunner


@pytest.fixture
def files(tmp_path):
    math = list({r.prompt_id: r for r in generate("math", seed=2, count=200, level=0)}.values())[:110]
    paths = {"a": tmp_path / "a" / "train.parquet", "b": tmp_path / "b" / "train.parquet",
             "small": tmp_path / "small.parquet"}
    for p in paths.values():
        p.parent.mkdir(exist_ok=True)
    write_records(math[:60], paths["a"])
    write_records(math[50:90], paths["b"])  # 10 ids shared with a: they belong to a (the first source)
    write_records(math[90:], paths["small"])
    return paths, [r.prompt_id for r in math]


def cfg_with(sources: str, *extra: str) -> TrainConfig:
    return load_config(TrainConfig, None, ["domains=[math]", f"data.sources={sources}", "data.holdout_max_prompts=4",
                                           *extra])


def test_pools_carry_each_problems_first_source_and_the_weights(files):
    paths, ids = files
    cfg = cfg_with(f"[{{domain: math, files: [{paths['a']}], weight: 3}}, {{domain: math, files: [{paths['b']}]}},"
                   f" {{domain: math, files: [{paths['small']}, {paths['a']}], weight: 0}}]")
    assert source_labels(cfg.data.sources) == ["train.parquet", "train.parquet#2", "small.parquet+1"]
    pool = build_data(cfg)["math"]
    assert pool.source_weights == {"train.parquet": 3.0, "train.parquet#2": 1.0, "small.parquet+1": 0.0}
    expected = {pid: "train.parquet" if i < 60 else "train.parquet#2" if i < 90 else "small.parquet+1"
                for i, pid in enumerate(ids)}
    assert pool.source_of == expected
    assert domain_weights(cfg) == {"math": 4.0}


def test_bad_weights_name_the_field(files):
    paths, _ = files
    with pytest.raises(ConfigError, match=r"data\.sources\.1\.weight"):
        cfg_with(f"[{{domain: math, files: [{paths['a']}]}}, {{domain: math, files: [{paths['b']}], weight: -1}}]")
    with pytest.raises(ConfigError, match=r"data.domain_weights.math is 2.0 but every data.sources weight of math"):
        domain_weights(cfg_with(f"[{{domain: math, files: [{paths['a']}], weight: 0}}]",
                                "data.domain_weights={math: 2}"))
    with pytest.raises(ConfigError, match="weight after '@' must be a number"):
        data_overrides([f"math={paths['a']}@three"], [], domains_given=False)
    with pytest.raises(ConfigError, match=r"data\.sources\.0\.weight"):
        resolve_config(flags=RunFlags(data=[f"math={paths['a']}@-2"]))


def test_data_flag_weights_reach_the_sources_and_the_dry_run(files):
    paths, _ = files
    flags = data_overrides([f"math={paths['a']}@3", f"math={paths['b']},{paths['small']}"], [], domains_given=False)
    sources = json.loads(flags[0].removeprefix("data.sources="))
    assert [(s.get("weight"), len(s["files"])) for s in sources] == [(3.0, 1), (None, 2)]
    result = CliRunner().invoke(build_app(), ["train", "--data", f"math={paths['a']}@3", "--data",
                                              f"math={paths['b']}", "--dry-run"])
    assert result.exit_code == 0, result.output
    line = re.search(r"train\.parquet: (\d+) training, weight 3 \(75 % of draws\); "
                     r"train\.parquet#2: (\d+) training, weight 1 \(25 % of draws\)", result.output)
    assert line and int(line[1]) + int(line[2]) == int(re.search(r"math: (\d+) training", result.output)[1])


def test_a_run_logs_the_mix_per_step_and_per_sample(files, tmp_path):
    """The tiny model (no warm start) for 6 steps on two math files weighted 1 : 3: the step records count
    the draws per source and the rollout lines name each sample's source."""
    from scalerl.trainer.run.log import read_metrics

    paths, _ = files
    out = tmp_path / "run"
    result = CliRunner().invoke(build_app(), [
        "train", "--data", f"math={paths['a']}", "--data", f"math={paths['small']}@3", "--max-steps", "6",
        "--out", str(out), "warm_start.enabled=false", "pipeline.prompts_per_step=4", "pipeline.samples_per_prompt=2",
        "pipeline.max_time_s=null", "validation.min_evaluations_per_domain=2", "data.holdout_max_prompts=2",
        "rollout_log.samples_per_step=8", "logging.progress=lines"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    draws: Counter[str] = Counter()
    for rec in read_metrics(out / "metrics.jsonl", "step"):
        draws.update({k: v for k, v in rec.items() if k.startswith("draws/")})
    assert set(draws) == {"draws/math/train.parquet", "draws/math/small.parquet"}
    assert draws["draws/math/small.parquet"] > 2 * draws["draws/math/train.parquet"]  # 3 : 1 (20 vs 60 problems)
    rows = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    assert {r["source"] for r in rows if r["kind"] == "train"} == {"train.parquet", "small.parquet"}


def test_model_alone_on_cpu_takes_the_small_cpu_values(tmp_path, caplog):
    from tests.support.models import tiny_llama

    folder = tmp_path / "hf"
    tiny_llama().save_pretrained(folder)
    flags = RunFlags(model=str(folder))
    caplog.set_level("INFO")
    cfg, _ = resolve_config(flags=flags)
    small = load_config(TrainConfig, None, [], base=preset_values("small-cpu"))
    assert cfg.model == str(folder)
    assert cfg.model_dump(exclude={"model"}) == small.model_dump(exclude={"model"})
    assert any("using --preset small-cpu's values" in r.getMessage() for r in caplog.records)
    tiny, _ = resolve_config(flags=flags, preset="tiny-cpu")
    assert tiny.length == TrainConfig().length and tiny.engine == TrainConfig().engine and tiny.model == str(folder)
    overridden, _ = resolve_config(None, ["pipeline.k=5"], flags)
    assert overridden.pipeline.k == 5 and overridden.length == small.length  # overrides still win
    yaml = tmp_path / "run.yaml"
    yaml.write_text("pipeline: {k: 3}\n")
    assert resolve_config(yaml, [], flags)[0].length == TrainConfig().length  # --config: nothing implied


def test_the_cpu_default_draws_and_stores_exactly_what_it_did_without_sources():
    from scalerl.curriculum.sampler import Sampler

    cfg = TrainConfig()
    pools = build_data(cfg)
    assert {dom: pool.source_weights for dom, pool in pools.items()} == {"math": {"generator": 1.0},
                                                                          "code": {"generator": 1.0}}
    problems = [p for pool in pools.values() for p in pool.train + pool.holdout]
    held = {p.prompt_id for pool in pools.values() for p in pool.holdout}
    common = dict(weights=domain_weights(cfg), seed=cfg.pipeline.seed, holdout_ids=held)
    plain = Sampler(problems, **common)
    mixed = Sampler(problems, **common, sources={d: p.source_weights for d, p in pools.items()},
                    source_of={pid: s for p in pools.values() for pid, s in p.source_of.items()})
    assert not mixed.mixes
    for _ in range(40):
        assert [p.prompt_id for p in mixed.next_batch(16)] == [p.prompt_id for p in plain.next_batch(16)]
    assert mixed.state_dict() == plain.state_dict()
