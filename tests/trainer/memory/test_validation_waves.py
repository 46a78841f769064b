"""Validation that fits: a paper-sized `min_evaluations_per_domain` runs in waves on an engine whose
slots (and so its preallocated KV cache) are bounded by `engine.kv_cache_gib`, never by the sample count."""

from __future__ import annotations

import pytest
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.engines.factory import build_torch_engine
from scalerl.trainer.memory.kv import engine_slots, kv_bytes_per_token
from scalerl.trainer.rollout.problems import PromptCodec
from scalerl.trainer.run.data_sources import build_data
from scalerl.trainer.run.validation import evaluate
from scalerl.trainer.tiny.model import CharTokenizer, build_tiny_model
from scalerl.verifiers import VerifierPool

from tests.support.tiny_policy import SMALL_MODEL, small_train_config

SLOTS = 6


@pytest.fixture(scope="module")
def model():
    return build_tiny_model(SMALL_MODEL, CharTokenizer())


def budget_cfg(model, *overrides: str):
    """A config whose KV budget allows exactly SLOTS full-length sequences of the model."""
    cfg = small_train_config("engine.max_seq_len=64", *overrides)
    c = model.config
    per_token = kv_bytes_per_token(c.num_hidden_layers, c.num_key_value_heads, c.head_dim, cfg.engine.dtype)
    gib = (SLOTS + 0.5) * cfg.engine.max_seq_len * per_token / (1 << 30)
    return small_train_config("engine.max_seq_len=64", f"engine.kv_cache_gib={gib!r}", *overrides)


def test_budget_bounds_the_engine_cache(model):
    cfg = budget_cfg(model)
    assert engine_slots(model.config, cfg.engine) == SLOTS
    engine = build_torch_engine(cfg.engine, model, 0, fp32_head=True, device="cpu", policy_version=0, seed=0)
    try:
        dec = engine.decoder
        cache = sum(t.numel() * t.element_size() for t in dec.k + dec.v)
        assert dec.max_slots == SLOTS and cache <= cfg.engine.kv_cache_gib * (1 << 30)
    finally:
        engine.close()


def test_paper_sized_validation_runs_in_waves_of_bounded_slots(model):
    """1,000 evaluations (the paper preset's) over 2 prompts: 500 samples of each prompt in groups of <= SLOTS."""
    cfg = budget_cfg(model, "validation.min_evaluations_per_domain=1000", "engine.max_new_tokens=2")
    pools = build_data(TrainConfig.model_validate({"data": {"generated_per_domain": 30, "holdout_fraction": 0.1,
                                                            "holdout_max_prompts": 2}}))
    holdout = {"math": pools["math"].holdout}
    groups: list[int] = []
    with VerifierPool() as verifier:
        out = evaluate(model, PromptCodec(CharTokenizer()), holdout, cfg, verifier, device="cpu", policy_version=0,
                       record=lambda problem, samples, texts, verdicts: groups.append(len(samples)))
    for domain in holdout:
        assert out[f"heldout/{domain}/n"] == 1000
    assert max(groups) <= SLOTS and sum(groups) == 1000
