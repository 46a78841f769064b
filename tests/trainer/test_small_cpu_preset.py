"""`--preset small-cpu` without `--data` resolves to its mix (no model loads): code tasks stated in words,
generator instructions for `if` evaluated on real IFEval prompts never trained on; `--data` replaces the
mix and `--domains` chooses from it; the held-out file is what its script selects."""

from __future__ import annotations

import json

import pytest
from scalerl.env.contracts.config_loader import ConfigError
from scalerl.env.contracts.paths import REPO
from scalerl.env.sources.generators import generate
from scalerl.env.sources.verl import load_record_file, write_records
from scalerl.trainer.config.presets import IFEVAL_HELDOUT
from scalerl.trainer.config.resolve import RunFlags, resolve_config
from scalerl.trainer.run.data_sources import build_data

WORDS = {"math": {"arithmetic_words", "word_problem"}, "code": {"function_words"}}


def test_the_preset_alone_trains_the_mix_and_holds_out_real_ifeval_prompts():
    cfg, _ = resolve_config(preset="small-cpu")
    assert cfg.model == "smollm2-135m-instruct" and cfg.domains == ["code", "if"]
    pools = build_data(cfg)
    assert set(pools) == {"code", "if"}
    _assert_words(pools, "code", cfg.data.holdout_max_prompts)
    ifeval = pools["if"]
    assert {p.source for p in ifeval.holdout} == {"ifeval"} and len(ifeval.holdout) == 64
    assert {p.source for p in ifeval.train} == {"gen-if"}
    assert {p.metadata["level"] for p in ifeval.train} == {1}
    assert not {p.prompt_id for p in ifeval.train} & {p.prompt_id for p in ifeval.holdout}


def _assert_words(pools, domain, holdout):
    pool = pools[domain]
    assert {p.metadata["task"] for p in (*pool.train, *pool.holdout)} == WORDS[domain]
    assert len(pool.holdout) == holdout
    assert not {p.prompt_id for p in pool.train} & {p.prompt_id for p in pool.holdout}


def test_data_replaces_the_mix_as_without_the_preset(tmp_path):
    path = tmp_path / "m.parquet"
    write_records(generate("math", seed=1, count=40, level=1), path)
    cfg, _ = resolve_config(preset="small-cpu", flags=RunFlags(data=[f"math={path}"]))
    assert cfg.domains == ["math"] and cfg.data.heldout == {}
    assert [s.files for s in cfg.data.sources] == [[str(path)]]
    assert cfg.length.think_budget_max_tokens == 128  # the rest of the preset stays
    pools = build_data(cfg)
    assert len(pools["math"].train) + len(pools["math"].holdout) == 40
    held, _ = resolve_config(preset="small-cpu", flags=RunFlags(data=[f"math={path}"], heldout=[f"math={path}"]))
    assert held.data.heldout == {"math": [str(path)]}


def test_domains_chooses_from_the_mix():
    only_if, _ = resolve_config(preset="small-cpu", flags=RunFlags(domains="if"))
    assert set(build_data(only_if)) == {"if"} and list(only_if.data.heldout) == ["if"]
    code, _ = resolve_config(preset="small-cpu", flags=RunFlags(domains="code"))
    assert code.data.heldout == {} and set(build_data(code)) == {"code"}
    with pytest.raises(ConfigError, match=r"domains \['math'\] are trained but data.sources has none"):
        build_data(resolve_config(preset="small-cpu", flags=RunFlags(domains="math,code,if"))[0])
    source = "{domain: math, kind: generator, level: 4, families: [arithmetic_words, word_problem]}"
    math, _ = resolve_config(None, [f"data.sources=[{source}]"], RunFlags(domains="math"), preset="small-cpu")
    _assert_words(build_data(math), "math", math.data.holdout_max_prompts)


def test_the_heldout_file_is_what_its_script_selects():
    import importlib.util

    script_path = REPO / IFEVAL_HELDOUT.replace("heldout.parquet", "heldout.py")
    spec = importlib.util.spec_from_file_location("ifeval_heldout", script_path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    held = load_record_file(REPO / IFEVAL_HELDOUT, "if")
    assert len(held) == script.PROMPTS == 64
    kept = set(script.kept_keys())
    assert 400 < len(kept) < 541 and {r.metadata["row_id"] for r in held} <= kept
    rows = {json.loads(line)["key"]: json.loads(line) for line in script.SOURCE.read_text().splitlines()}
    assert not script.fits(rows[1000])  # "Write a 300+ word summary ...": cannot fit the answer budget
    assert all(r.prompt[0].content == rows[r.metadata["row_id"]]["prompt"] for r in held)
    assert [r.prompt_id for r in script.select()] == [r.prompt_id for r in held]
