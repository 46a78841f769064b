"""Group-centred advantages: hand-computed normalizations and zero-variance flags."""

import math

import pytest
import torch
from scalerl.trainer.core.advantages import AdvantageConfig, compute_advantages
from scalerl.trainer.core.losses import LossConfig, aggregation_weights, policy_loss

# group 7: one correct of four; group 3: all correct (zero variance); group 5: two of four.
REWARDS = torch.tensor([1.0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 1, 0])
GROUPS = torch.tensor([7] * 4 + [3] * 4 + [5] * 4)
CENTRED = [0.75, -0.25, -0.25, -0.25, 0, 0, 0, 0, 0.5, -0.5, 0.5, -0.5]


def test_batch_normalization_divides_by_the_effective_batch_std():
    adv, zero_var, metrics = compute_advantages(REWARDS, GROUPS, AdvantageConfig(eps=0.0))
    std = math.sqrt((0.75**2 + 3 * 0.25**2 + 4 * 0.5**2) / 8)  # groups 7 and 5 only; their mean is 0
    assert adv.tolist() == pytest.approx([c / std for c in CENTRED], rel=1e-6)
    assert zero_var.tolist() == [False] * 4 + [True] * 4 + [False] * 4
    assert metrics["frac_reward_zero_std"] == pytest.approx(1 / 3)


def test_batch_std_over_all_samples_when_asked():
    adv, _, _ = compute_advantages(REWARDS, GROUPS, AdvantageConfig(eps=0.0, std_includes_zero_variance=True))
    std = math.sqrt((0.75**2 + 3 * 0.25**2 + 4 * 0.5**2) / 12)
    assert adv.tolist() == pytest.approx([c / std for c in CENTRED], rel=1e-6)


def test_prompt_normalization_divides_by_each_group_std():
    adv, _, _ = compute_advantages(REWARDS, GROUPS, AdvantageConfig(normalization="prompt", eps=0.0))
    s7 = math.sqrt((0.75**2 + 3 * 0.25**2) / 4)
    expected = [c / s7 for c in CENTRED[:4]] + [0.0] * 4 + [c / 0.5 for c in CENTRED[8:]]
    assert adv.tolist() == pytest.approx(expected, rel=1e-6)


def test_no_normalization_is_just_group_centring():
    adv, _, _ = compute_advantages(REWARDS, GROUPS, AdvantageConfig(normalization="none"))
    assert adv.tolist() == pytest.approx(CENTRED)


def test_all_zero_variance_batch_gives_zero_advantages_without_nan():
    adv, zero_var, _ = compute_advantages(torch.ones(4), torch.tensor([0, 0, 1, 1]), AdvantageConfig())
    assert adv.tolist() == [0.0] * 4 and bool(zero_var.all())


def test_all_equal_reward_group_contributes_nothing_to_the_gradient():
    adv, _, _ = compute_advantages(REWARDS, GROUPS, AdvantageConfig())
    tokens_per_sample = 3
    sample_ids = torch.arange(12).repeat_interleave(tokens_per_sample)
    lp = torch.randn(36, dtype=torch.float64, requires_grad=True)
    loss, _ = policy_loss(
        lp,
        lp.detach() + 0.1,
        adv.repeat_interleave(tokens_per_sample),
        sample_ids,
        GROUPS.repeat_interleave(tokens_per_sample),
        torch.ones(36, dtype=torch.bool),
        LossConfig(),
        token_weights=aggregation_weights(sample_ids, GROUPS.repeat_interleave(tokens_per_sample),
                                          torch.ones(36, dtype=torch.bool), "prompt"),
    )
    loss.backward()
    in_flat_group = GROUPS.repeat_interleave(tokens_per_sample) == 3
    assert lp.grad[in_flat_group].abs().sum().item() == 0.0
    assert lp.grad[~in_flat_group].abs().sum().item() > 0.0


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="equal length"):
        compute_advantages(torch.ones(3), torch.zeros(2, dtype=torch.long), AdvantageConfig())
    with pytest.raises(ValueError, match="NaN"):
        compute_advantages(
            torch.tensor([1.0, float("nan")]), torch.zeros(2, dtype=torch.long), AdvantageConfig()
        )


def test_zero_variance_flags_given_by_the_caller_give_the_same_result_as_computed_ones():
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.5])
    group_ids = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    computed = compute_advantages(rewards, group_ids, AdvantageConfig())
    given = compute_advantages(rewards, group_ids, AdvantageConfig(), zero_variance=computed.zero_variance)
    assert computed.zero_variance.tolist() == [False, False, True, True, True, True, False, False]
    assert torch.equal(given.advantages, computed.advantages) and given.metrics == computed.metrics
