"""The warm start shipped in `datasets/warm_start/` is the built-in CPU default's, covers math, code and if,
and every subset of those domains on the CPU default uses it (so `--domains math,code,if` starts RL at once)."""

from __future__ import annotations

import importlib.util
import logging

import pytest
from scalerl.env.contracts.paths import DATASETS
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.run.data_sources import build_data, warm_start_problems
from scalerl.trainer.tiny import warm_start as ws

SHIPPED_DOMAINS = {"math", "code", "if"}


def _build_module():
    spec = importlib.util.spec_from_file_location("warm_start_build", DATASETS / "warm_start" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_folder_is_the_default_runs_key():
    key, _ = _build_module().default_key_and_problems()
    shipped = sorted(p.name for p in ws.SHIPPED.iterdir() if p.is_dir() and not p.name.startswith("_"))
    assert shipped == [key], ("the shipped warm start no longer matches the CPU default's key: run "
                              "`python datasets/warm_start/build.py` (about 7 minutes idle) and commit the folder")


def test_the_shipped_start_learned_math_code_and_if():
    _, problems = _build_module().default_key_and_problems()
    assert {p.domain for p in problems} == SHIPPED_DOMAINS
    assert SHIPPED_DOMAINS <= set(TrainConfig().warm_start.domains)


def _key(domains: list[str]) -> str:
    cfg = TrainConfig(domains=domains)
    return ws.cache_key(cfg.tiny, cfg.warm_start, warm_start_problems(cfg, build_data(cfg)))


@pytest.mark.parametrize("domains", [["math", "code", "if"], ["if", "code", "math"], ["math"], ["code", "if"]])
def test_every_subset_of_the_domains_uses_the_shipped_start(domains):
    key, _ = _build_module().default_key_and_problems()
    assert _key(domains) == key


def test_the_warm_start_never_sees_a_held_out_problem():
    """Of a trained domain (the run's own split) and of a domain it does not train (the generator's split is
    the one a run training it would make)."""
    math_only = TrainConfig(domains=["math"])
    learned = {p.prompt_id for p in warm_start_problems(math_only, build_data(math_only))}
    full = build_data(TrainConfig(domains=sorted(SHIPPED_DOMAINS)))
    assert all(not learned & {p.prompt_id for p in pool.holdout} for pool in full.values())
    assert {p.prompt_id for pool in full.values() for p in pool.train} == learned


def test_an_empty_cache_reuses_the_shipped_folder(tmp_path, monkeypatch, caplog):
    from scalerl.trainer.core.checkpoint import load_model_weights
    from scalerl.trainer.tiny.model import CharTokenizer, build_tiny_model

    monkeypatch.setenv("SCALERL_CACHE_DIR", str(tmp_path))
    key, problems = _build_module().default_key_and_problems()
    cfg = TrainConfig()
    caplog.set_level(logging.INFO, logger=ws.__name__)
    folder = ws.warm_start(cfg.tiny, cfg.warm_start, problems)
    assert folder == ws.SHIPPED / key and not any(tmp_path.iterdir())  # nothing trained, nothing written
    assert "reusing" in caplog.text
    load_model_weights(folder, build_tiny_model(cfg.tiny, CharTokenizer()))  # the weights fit the model
