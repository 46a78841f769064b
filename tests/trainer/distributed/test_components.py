"""`scalerl.trainer.distributed.components.make_components`: without Ray it gives the in-process components, whose
ledger, verifier pool and engine are the real objects."""

from __future__ import annotations

import sys

import pytest
from scalerl.curriculum.ledger.store import Ledger
from scalerl.trainer.distributed.components import LocalComponents, RayComponents, make_components
from scalerl.trainer.engines.torch_engine import TorchEngine
from scalerl.trainer.tiny.model import CharTokenizer, build_tiny_model
from scalerl.verifiers import VerifierPool

from tests.support.tiny_policy import SMALL_MODEL, small_train_config


@pytest.fixture
def no_ray(monkeypatch):
    """`import ray` fails: anything below that needs Ray errors out."""
    monkeypatch.setitem(sys.modules, "ray", None)


@pytest.fixture
def local(no_ray, tmp_path):
    cfg = small_train_config()
    parts = make_components(cfg.ray, cfg.engine_spec(), tmp_path)
    assert type(parts) is LocalComponents
    return parts


def test_ray_enabled_gives_the_ray_components(tmp_path):
    cfg = small_train_config("ray.enabled=true")
    assert type(make_components(cfg.ray, cfg.engine_spec(), tmp_path)) is RayComponents


def test_the_ledger_is_a_real_ledger_at_the_path(local, tmp_path):
    cfg = small_train_config()
    ledger = local.ledger(tmp_path / "ledger.duckdb", cfg.curriculum.retirement)
    try:
        assert type(ledger) is Ledger
        assert (tmp_path / "ledger.duckdb").exists()
    finally:
        ledger.close()


def test_the_verifier_is_a_real_pool_with_the_config(local):
    cfg = small_train_config("verifier.math.timeout_s=3.5")
    pool = local.verifier(cfg.verifier)
    try:
        assert type(pool) is VerifierPool
        assert pool.config == cfg.verifier
    finally:
        pool.close()


def test_the_engine_is_a_torch_engine_from_the_factory(local):
    engine = local.engine(build_tiny_model(SMALL_MODEL, CharTokenizer()), 2, device="cpu", policy_version=3, seed=0)
    try:
        assert type(engine) is TorchEngine
        assert engine.policy_version == 3
        assert engine.decoder.max_slots == local.spec.engine.max_slots
    finally:
        engine.close()
