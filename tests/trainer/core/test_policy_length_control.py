"""Length control: interruption plans, truncation masking and accounting, DAPO overlong penalty."""

import random

import numpy as np
import pytest
import torch
from scalerl.trainer.core.length_control import (
    LengthConfig,
    length_metrics,
    length_penalty,
    plan_interruption,
    training_loss_mask,
)
from scalerl.trainer.engines.base import GeneratedSample

PHRASE = [11, 12, 13]


def test_think_budget_is_drawn_uniformly_from_the_range():
    cfg = LengthConfig(think_budget_min_tokens=10, think_budget_max_tokens=13, answer_budget_tokens=5)
    rng = random.Random(0)
    budgets = [plan_interruption(cfg, rng, phrase_token_ids=PHRASE).think_budget_tokens for _ in range(4000)]
    counts = {b: budgets.count(b) for b in set(budgets)}
    assert set(counts) == {10, 11, 12, 13}
    assert all(abs(c / 4000 - 0.25) < 0.04 for c in counts.values())


@pytest.mark.parametrize(
    "rng", [np.random.default_rng(0), torch.Generator().manual_seed(0), random.Random(1)]
)
def test_plan_accepts_common_generators_and_carries_phrase_and_answer_budget(rng):
    paper = LengthConfig(think_budget_min_tokens=10_000, think_budget_max_tokens=12_000, answer_budget_tokens=2_000)
    plan = plan_interruption(paper, rng, phrase_token_ids=PHRASE)
    assert 10_000 <= plan.think_budget_tokens <= 12_000
    assert plan.phrase_token_ids == PHRASE and plan.answer_budget_tokens == 2_000


def test_plan_needs_phrase_ids_and_is_none_outside_interrupt_mode():
    with pytest.raises(ValueError, match="phrase's token ids"):
        plan_interruption(LengthConfig(), random.Random(0), phrase_token_ids=[])
    assert plan_interruption(LengthConfig(mode="penalty"), random.Random(0), phrase_token_ids=PHRASE) is None
    with pytest.raises(ValueError, match="think_budget_min_tokens"):
        LengthConfig(think_budget_min_tokens=5, think_budget_max_tokens=4)


def _sample(n, reason, mask=None, interrupted=False):
    return GeneratedSample(
        sample_index=0,
        token_ids=list(range(n)),
        logprobs=[-1.0] * n,
        policy_versions=[0] * n,
        loss_mask=mask or [1] * n,
        finish_reason=reason,
        interrupted=interrupted,
    )


def test_truncated_samples_are_masked_and_counted():
    cfg = LengthConfig()
    interrupted = _sample(5, "stop", mask=[1, 1, 0, 0, 1], interrupted=True)
    truncated = _sample(4, "length")
    assert training_loss_mask(interrupted, cfg) == [1, 1, 0, 0, 1]
    assert training_loss_mask(truncated, cfg) == [0, 0, 0, 0]
    assert training_loss_mask(truncated, LengthConfig(mask_truncated=False)) == [1, 1, 1, 1]
    m = length_metrics([interrupted, truncated, _sample(3, "stop"), _sample(2, "stop")])
    assert m["length/truncation_rate"] == 0.25 and m["length/interrupted_rate"] == 0.25
    assert m["length/max_tokens"] == 5 and m["length/mean_tokens"] == 3.5


def test_dapo_overlong_penalty_matches_its_formula():
    cfg = LengthConfig(mode="penalty", max_response_tokens=100, penalty_buffer_tokens=20)
    assert length_penalty(80, cfg, 128) == 0.0
    assert length_penalty(90, cfg, 128) == pytest.approx(-0.5)
    assert length_penalty(100, cfg, 128) == pytest.approx(-1.0)
    assert length_penalty(101, cfg, 128) == -1.0
    assert length_penalty(101, LengthConfig(max_response_tokens=100, penalty_buffer_tokens=20), 128) == 0.0


def test_penalty_budget_defaults_to_the_sampling_budget_and_a_fifth_of_it():
    cfg = LengthConfig(mode="penalty")
    assert cfg.penalty_budget(50) == (50, 10)
    assert length_penalty(40, cfg, 50) == 0.0 and length_penalty(45, cfg, 50) == pytest.approx(-0.5)
