"""The warm start shipped in `datasets/warm_start/` is the built-in CPU default's, and runs use it."""

from __future__ import annotations

import importlib.util
import logging

from scalerl.env.contracts.paths import DATASETS
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.tiny import warm_start as ws


def _build_module():
    spec = importlib.util.spec_from_file_location("warm_start_build", DATASETS / "warm_start" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_folder_is_the_default_runs_key():
    key, _ = _build_module().default_key_and_problems()
    shipped = sorted(p.name for p in ws.SHIPPED.iterdir() if p.is_dir() and not p.name.startswith("_"))
    assert shipped == [key], ("the shipped warm start no longer matches the CPU default's key: run "
                              "`python datasets/warm_start/build.py` (about 5 minutes) and commit the folder")


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
