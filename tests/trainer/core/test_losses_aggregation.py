"""Prompt / sample / token aggregation: hand-computed weights and the invariants they promise."""

import pytest
import torch
from scalerl.trainer.core.losses import LossConfig, aggregation_weights, policy_loss

# Group 0: sample 0 (2 tokens) and sample 1 (3 tokens, 1 masked); group 1: sample 2 (6 tokens).
SAMPLE_IDS = torch.tensor([0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 2])
GROUP_IDS = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
MASK = torch.tensor([1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1], dtype=torch.bool)


def _grad(aggregation, adv):
    lp = torch.full((11,), -1.0, dtype=torch.float64, requires_grad=True)
    loss, _ = policy_loss(
        lp, lp.detach().clone(), adv, SAMPLE_IDS, GROUP_IDS, MASK, LossConfig(aggregation=aggregation),
        token_weights=aggregation_weights(SAMPLE_IDS, GROUP_IDS, MASK, aggregation),
    )
    loss.backward()
    return lp.grad


def test_prompt_weights_hand_computed():
    w = aggregation_weights(SAMPLE_IDS, GROUP_IDS, MASK, "prompt").tolist()
    # two groups (G = 2); group 0 has 4 unmasked tokens, group 1 has 6.
    assert w == pytest.approx([1 / 8] * 4 + [0.0] + [1 / 12] * 6)


def test_sample_weights_hand_computed():
    w = aggregation_weights(SAMPLE_IDS, GROUP_IDS, MASK, "sample").tolist()
    assert w == pytest.approx([1 / 6] * 2 + [1 / 6] * 2 + [0.0] + [1 / 18] * 6)


def test_token_weights_hand_computed():
    w = aggregation_weights(SAMPLE_IDS, GROUP_IDS, MASK, "token").tolist()
    assert w == pytest.approx([0.1] * 4 + [0.0] + [0.1] * 6)


def test_prompt_aggregation_weighs_two_prompts_equally_whatever_their_lengths():
    adv = torch.ones(11, dtype=torch.float64)
    for aggregation, equal in (("prompt", True), ("token", False)):
        g = _grad(aggregation, adv)
        share0, share1 = g[GROUP_IDS == 0].sum().item(), g[GROUP_IDS == 1].sum().item()
        assert (share0 == pytest.approx(share1, rel=1e-12)) is equal, aggregation


def test_fully_masked_groups_do_not_count_in_the_group_mean():
    mask = MASK.clone()
    mask[GROUP_IDS == 1] = False
    w = aggregation_weights(SAMPLE_IDS, GROUP_IDS, mask, "prompt")
    assert w.sum().item() == pytest.approx(1.0)


def test_empty_mask_gives_zero_loss_that_backpropagates():
    lp = torch.zeros(3, requires_grad=True)
    loss, metrics = policy_loss(
        lp,
        lp.detach(),
        torch.ones(3),
        torch.arange(3),
        torch.zeros(3, dtype=torch.long),
        torch.zeros(3, dtype=torch.bool),
        LossConfig(),
        token_weights=aggregation_weights(torch.arange(3), torch.zeros(3, dtype=torch.long),
                                          torch.zeros(3, dtype=torch.bool), "prompt"),
    )
    loss.backward()
    assert loss.item() == 0.0 and lp.grad.abs().sum().item() == 0.0
    assert metrics["tokens/loss"] == 0


@pytest.mark.parametrize("aggregation", ["prompt", "sample", "token"])
def test_sliced_weights_make_micro_batch_losses_sum_to_the_full_loss(aggregation):
    torch.manual_seed(0)
    lp, gen, adv = torch.randn(11, dtype=torch.float64), torch.randn(11, dtype=torch.float64), torch.randn(11)
    cfg = LossConfig(aggregation=aggregation)
    w = aggregation_weights(SAMPLE_IDS, GROUP_IDS, MASK, aggregation)
    full, _ = policy_loss(lp, gen, adv, SAMPLE_IDS, GROUP_IDS, MASK, cfg, token_weights=w)
    parts = [
        policy_loss(
            lp[a:b], gen[a:b], adv[a:b], SAMPLE_IDS[a:b], GROUP_IDS[a:b], MASK[a:b], cfg, token_weights=w[a:b]
        )[0]
        for a, b in ((0, 2), (2, 5), (5, 11))
    ]
    assert sum(p.item() for p in parts) == pytest.approx(full.item(), rel=1e-12)
