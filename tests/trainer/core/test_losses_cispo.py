"""CISPO and the PPO-style losses against hand-computed values and gradients."""

import math

import pytest
import torch
from scalerl.trainer.core.losses import LOSSES, LossConfig, aggregation_weights, policy_loss, register_loss


def _run(lp, gen, adv, cfg, *, mask=None, sample_ids=None, group_ids=None):
    lp = torch.tensor(lp, dtype=torch.float64, requires_grad=True)
    n = lp.shape[0]
    mask = torch.ones(n, dtype=torch.bool) if mask is None else torch.tensor(mask, dtype=torch.bool)
    sids = torch.arange(n) if sample_ids is None else torch.tensor(sample_ids)
    gids = torch.zeros(n, dtype=torch.long) if group_ids is None else torch.tensor(group_ids)
    loss, metrics = policy_loss(
        lp,
        torch.tensor(gen, dtype=torch.float64),
        torch.tensor(adv, dtype=torch.float64),
        sids,
        gids,
        mask,
        cfg,
        token_weights=aggregation_weights(sids, gids, mask, cfg.aggregation),
    )
    loss.backward()
    return loss.item(), lp.grad.tolist(), metrics


def test_cispo_value_and_gradient_match_hand_computation():
    lp, gen = [-1.0, -0.5, -2.0, -0.1], [-1.0, -1.0, -2.5, -3.0]
    adv = [1.0, 1.0, -1.0, -1.0]
    rho = [1.0, math.exp(0.5), math.exp(0.5), 5.0]  # last one exp(2.9) ≈ 18.2 is capped at eps_max
    cfg = LossConfig(name="cispo", aggregation="token", eps_max=5.0)
    loss, grad, metrics = _run(lp, gen, adv, cfg)
    expected = -sum(r * a * x for r, a, x in zip(rho, adv, lp)) / 4
    assert loss == pytest.approx(expected, rel=1e-12)
    assert grad == pytest.approx([-r * a / 4 for r, a in zip(rho, adv)], rel=1e-12)
    assert metrics["clip_frac"] == pytest.approx(0.25)
    assert metrics["ratio/max"] == pytest.approx(math.exp(2.9))
    assert metrics["tokens/loss"] == 4


def test_cispo_has_no_lower_clip():
    # ratio 0.01 with a negative advantage: PPO would clip (zero grad), CISPO keeps the gradient.
    _, grad, metrics = _run([math.log(0.01)], [0.0], [-1.0], LossConfig(name="cispo", aggregation="token"))
    assert grad == pytest.approx([0.01])
    assert metrics["clip_frac"] == 0.0


def test_masked_tokens_get_zero_gradient_even_with_garbage_gen_logprobs():
    lp, gen = [-1.0, -0.5, -2.0], [1e4, -0.5, -1e4]  # masked gen logprobs would overflow exp
    for name in LOSSES:
        loss, grad, _ = _run(
            lp, gen, [1.0, 1.0, 1.0], LossConfig(name=name, aggregation="token"), mask=[0, 1, 0]
        )
        assert math.isfinite(loss)
        assert grad[0] == 0.0 and grad[2] == 0.0, name
        assert grad[1] != 0.0, name


@pytest.mark.parametrize(
    ("name", "ratio", "adv", "loss", "grad"),
    [
        ("dapo", 1.5, 1.0, -1.28, 0.0),  # above 1 + eps_high: clipped, no gradient
        ("dapo", 1.25, 1.0, -1.25, -1.25),  # inside clip-higher range
        ("grpo", 1.25, 1.0, -1.2, 0.0),  # symmetric eps 0.2 clips it
        ("dapo", 1.5, -1.0, 1.5, 1.5),  # negative advantage, large ratio: unclipped branch is the min
        ("dapo", 0.5, -1.0, 0.8, 0.0),  # below 1 - eps_low with negative advantage: clipped
        ("dapo", 0.5, 1.0, -0.5, -0.5),  # below 1 - eps_low with positive advantage: unclipped
    ],
)
def test_ppo_style_losses_match_hand_computation(name, ratio, adv, loss, grad):
    cfg = LossConfig(name=name, aggregation="token", eps_low=0.2, eps_high=0.28)
    got_loss, got_grad, _ = _run([math.log(ratio) - 1.0], [-1.0], [adv], cfg)
    assert got_loss == pytest.approx(loss, rel=1e-12)
    assert got_grad == pytest.approx([grad], abs=1e-12)


def test_gspo_uses_the_sequence_ratio_for_every_token():
    # One sample, token log-ratios 0.1 and 0.3: s = exp(0.2) for both tokens.
    cfg = LossConfig(name="gspo", aggregation="token", gspo_eps_low=0.5, gspo_eps_high=1.0)
    loss, grad, _ = _run([-0.9, -0.7], [-1.0, -1.0], [1.0, 1.0], cfg, sample_ids=[0, 0])
    s = math.exp(0.2)
    assert loss == pytest.approx(-s, rel=1e-12)
    assert grad == pytest.approx([-s / 2, -s / 2], rel=1e-12)


def test_gspo_clips_whole_sequences():
    cfg = LossConfig(name="gspo", aggregation="token")  # eps 3e-3 / 5e-3: exp(0.2) is far outside
    _, grad, metrics = _run([-0.9, -0.7], [-1.0, -1.0], [1.0, 1.0], cfg, sample_ids=[0, 0])
    assert grad == [0.0, 0.0]
    assert metrics["clip_frac"] == 1.0


def test_on_policy_cispo_gradient_is_the_policy_gradient():
    # rho = 1 everywhere: d loss / d logprob = -A / N.
    _, grad, metrics = _run([-1.0, -2.0], [-1.0, -2.0], [0.5, -0.5], LossConfig(aggregation="token"))
    assert grad == pytest.approx([-0.25, 0.25])
    assert metrics["ratio/mean"] == 1.0 and metrics["kl/k3"] == 0.0


def test_unknown_names_and_bad_shapes_are_clear_errors():
    with pytest.raises(ValueError, match="already registered"):
        register_loss("cispo")(lambda *a: None)
    with pytest.raises(ValueError, match="1-D tensors of equal length"):
        policy_loss(
            torch.zeros(3),
            torch.zeros(2),
            torch.zeros(3),
            torch.zeros(3, dtype=torch.long),
            torch.zeros(3, dtype=torch.long),
            torch.ones(3, dtype=torch.bool),
            LossConfig(),
            token_weights=torch.ones(3),
        )
    with pytest.raises(Exception, match="name"):
        LossConfig(name="ppo")
