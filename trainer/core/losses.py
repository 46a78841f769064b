"""Policy losses of the ScaleRL family over packed token tensors, in a registry.

Every tensor is `[num_tokens]` (packed, no padding): `logprobs` = log π_train(y_t) with grad,
`gen_logprobs` = log π_gen(y_t) recorded by the sampler, `advantages` = the sample's Â broadcast to
its tokens, `sample_ids` / `group_ids` = which sample / prompt group the token belongs to,
`loss_mask` = 1 where the token trains (0 for prompt tokens, the injected interruption phrase, and
truncated samples). Masked tokens never reach `exp`, so garbage logprobs there cannot make NaNs.

Per-token importance ratio ρ_t = exp(logprobs_t − gen_logprobs_t). Per-token losses ℓ_t:

- `cispo` (MiniMax-M1; ScaleRL's choice): ℓ_t = −sg(min(ρ_t, ε_max)) · Â · log π_train(y_t).
  No lower clip; the gradient flows only through log π_train, so ∂ℓ_t/∂logprobs_t = −min(ρ_t, ε_max)·Â.
- `dapo` (PPO-clip with DAPO's decoupled "clip-higher" range):
  ℓ_t = −min(ρ_t Â, clip(ρ_t, 1 − ε_low, 1 + ε_high) Â).
- `grpo` (PPO-clip with a symmetric range, as in DeepSeekMath): the `dapo` formula with
  ε_high = ε_low. No KL penalty (coefficient 0, the common modern setting) — a departure from the
  original GRPO paper, which used a KL term to a reference model.
- `gspo` (Qwen GSPO-token): sequence ratio s_i = exp(mean_{t∈i, unmasked}(logprobs − gen_logprobs)),
  per-token s_it = sg(s_i) · π_train(y_t) / sg(π_train(y_t)) (equal to s_i in value, gradient of
  GSPO-token), ℓ_t = −min(s_it Â, clip(s_it, 1 − ε_low^gspo, 1 + ε_high^gspo) Â).

Aggregation turns ℓ_t into the scalar loss L = Σ_t w_t ℓ_t with weights `aggregation_weights`:
- `prompt` (ScaleRL): w_t = m_t / (G · N_g), N_g = unmasked tokens of all samples of the token's
  group, G = groups with at least one unmasked token. Each prompt weighs the same whatever its lengths.
- `sample` (GRPO): w_t = m_t / (S · N_i), N_i = unmasked tokens of the sample, S = samples with
  at least one unmasked token.
- `token` (DAPO): w_t = m_t / N, N = unmasked tokens in the batch.

Guarantees: `policy_loss` takes the weights of its tokens (`token_weights`) computed on the whole
batch (`scalerl.trainer.distributed.sharding.cut_batch`, the one caller of `aggregation_weights` in the
update), so the micro-batch losses sum to the full-batch loss and gradient accumulation is
mathematically equivalent to one large batch. An all-masked batch gives a
zero loss that still has a graph (backward is a no-op, never a crash).
Non-guarantees: no dual-clip for PPO-style losses with negative advantages (a huge ρ is not capped
for `dapo`/`grpo`, as in the papers); no entropy or KL terms.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from scalerl.trainer.core.recipe_config import Aggregation, LossConfig
from torch import Tensor

TokenLossFn = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor, LossConfig], tuple[Tensor, Tensor]]
"""(logprobs, log_ratio, advantages, sample_ids, mask, cfg) -> (per-token loss, clipped-token flags)."""

LOSSES: dict[str, TokenLossFn] = {}


def register_loss(name: str) -> Callable[[TokenLossFn], TokenLossFn]:
    """Add a per-token loss to `LOSSES` under `name`; a duplicate name is an error."""

    def wrap(fn: TokenLossFn) -> TokenLossFn:
        if name in LOSSES:
            raise ValueError(f"loss {name!r} is already registered")
        LOSSES[name] = fn
        return fn

    return wrap


def _ppo_clip(ratio: Tensor, adv: Tensor, low: float, high: float) -> tuple[Tensor, Tensor]:
    clipped_ratio = ratio.clamp(1.0 - low, 1.0 + high)
    unclipped, clipped = ratio * adv, clipped_ratio * adv
    loss = -torch.minimum(unclipped, clipped)
    # The clipped branch is the active one (zero gradient) exactly where it is strictly smaller.
    return loss, (clipped < unclipped).detach()


@register_loss("cispo")
def cispo_token_loss(logprobs, log_ratio, adv, sample_ids, mask, cfg):
    ratio = log_ratio.detach().exp()
    capped = ratio.clamp(max=cfg.eps_max)
    return -(capped * adv * logprobs), ratio > cfg.eps_max


@register_loss("dapo")
def dapo_token_loss(logprobs, log_ratio, adv, sample_ids, mask, cfg):
    return _ppo_clip(log_ratio.exp(), adv, cfg.eps_low, cfg.eps_high)


@register_loss("grpo")
def grpo_token_loss(logprobs, log_ratio, adv, sample_ids, mask, cfg):
    return _ppo_clip(log_ratio.exp(), adv, cfg.eps_low, cfg.eps_low)


@register_loss("gspo")
def gspo_token_loss(logprobs, log_ratio, adv, sample_ids, mask, cfg):
    _, inverse = torch.unique(sample_ids, return_inverse=True)
    n_samples = int(inverse.max()) + 1 if inverse.numel() else 0
    m = mask.to(log_ratio.dtype)
    sums = torch.zeros(n_samples, dtype=log_ratio.dtype, device=log_ratio.device)
    counts = torch.zeros_like(sums)
    sums.index_add_(0, inverse, (log_ratio * m).detach())
    counts.index_add_(0, inverse, m)
    seq_log_ratio = (sums / counts.clamp(min=1))[inverse]
    ratio = (seq_log_ratio + logprobs - logprobs.detach()).exp()
    return _ppo_clip(ratio, adv, cfg.gspo_eps_low, cfg.gspo_eps_high)


def _segment_totals(ids: Tensor, values: Tensor) -> tuple[Tensor, int]:
    """Per-token total of `values` over the tokens sharing its id, and the number of ids with total > 0."""
    _, inverse = torch.unique(ids, return_inverse=True)
    totals = torch.zeros(int(inverse.max()) + 1, dtype=values.dtype, device=values.device)
    totals.index_add_(0, inverse, values)
    return totals[inverse], int((totals > 0).sum())


def aggregation_weights(
    sample_ids: Tensor, group_ids: Tensor, loss_mask: Tensor, aggregation: Aggregation
) -> Tensor:
    """w_t such that the aggregated loss is Σ_t w_t ℓ_t (see the module docstring); float64 for exactness."""
    m = loss_mask.to(torch.float64)
    if m.numel() == 0 or float(m.sum()) == 0.0:
        return torch.zeros_like(m)
    if aggregation == "token":
        return m / m.sum()
    ids = {"prompt": group_ids, "sample": sample_ids}.get(aggregation)
    if ids is None:
        raise ValueError(f"unknown aggregation {aggregation!r}; expected prompt, sample or token")
    per_token_total, n_units = _segment_totals(ids, m)
    return m / (per_token_total.clamp(min=1.0) * n_units)


def _check_shapes(**tensors: Tensor) -> int:
    sizes = {name: tuple(t.shape) for name, t in tensors.items()}
    first = next(iter(sizes.values()))
    if len(first) != 1 or any(s != first for s in sizes.values()):
        raise ValueError(f"policy_loss needs 1-D tensors of equal length, got {sizes}")
    return first[0]


def policy_loss(
    logprobs: Tensor,
    gen_logprobs: Tensor,
    advantages: Tensor,
    sample_ids: Tensor,
    group_ids: Tensor,
    loss_mask: Tensor,
    cfg: LossConfig,
    *,
    token_weights: Tensor,
) -> tuple[Tensor, dict[str, float]]:
    """The aggregated policy loss Σ_t w_t ℓ_t (to minimise) and its metrics.

    `token_weights` are the tokens' aggregation weights (`aggregation_weights` of the whole batch, sliced
    to these tokens), so micro-batch losses add up to the whole batch's loss.
    Metrics (floats): `loss`, `tokens/loss` and `tokens/total` (counts), `ratio/mean|min|max` over
    unmasked tokens, `clip_frac` (tokens whose ratio is capped/clipped; veRL `pg_clipfrac`, TRL
    `clip_ratio/region_mean`), `clip_frac/low|high` (clipped tokens whose own ratio is below / above 1), `kl/k1`
    (mean of
    log π_gen − log π_train, veRL `ppo_kl`) and `kl/k3` (mean of ρ − 1 − log ρ, always ≥ 0),
    `advantage/mean` over unmasked tokens.
    """
    _check_shapes(
        logprobs=logprobs,
        gen_logprobs=gen_logprobs,
        advantages=advantages,
        sample_ids=sample_ids,
        group_ids=group_ids,
        loss_mask=loss_mask,
        token_weights=token_weights,
    )
    if cfg.name not in LOSSES:
        raise ValueError(f"unknown loss {cfg.name!r}; registered: {sorted(LOSSES)}")
    mask = loss_mask.bool()
    # Mask before exp: prompt tokens carry placeholder gen logprobs that must not overflow.
    log_ratio = torch.where(mask, logprobs - gen_logprobs.to(logprobs.dtype), torch.zeros_like(logprobs))
    adv = advantages.to(logprobs.dtype)
    per_token, clipped = LOSSES[cfg.name](logprobs, log_ratio, adv, sample_ids, mask, cfg)
    per_token = torch.where(mask, per_token, torch.zeros_like(per_token))
    loss = (per_token * token_weights.to(per_token.dtype)).sum()
    metrics = _loss_metrics(loss, log_ratio.detach(), adv, clipped & mask, mask)
    return loss, metrics


def _loss_metrics(
    loss: Tensor, log_ratio: Tensor, adv: Tensor, clipped: Tensor, mask: Tensor
) -> dict[str, float]:
    n = int(mask.sum())
    metrics = {"loss": float(loss.detach()), "tokens/loss": float(n), "tokens/total": float(mask.numel())}
    if n == 0:
        return metrics
    lr = log_ratio[mask].double()
    ratio = lr.exp()
    a = adv[mask].double()
    high, low = clipped[mask] & (lr > 0), clipped[mask] & (lr < 0)
    metrics.update(
        {
            "ratio/mean": float(ratio.mean()),
            "ratio/min": float(ratio.min()),
            "ratio/max": float(ratio.max()),
            "clip_frac": float(clipped[mask].double().mean()),
            "clip_frac/high": float(high.double().mean()),
            "clip_frac/low": float(low.double().mean()),
            "kl/k1": float((-lr).mean()),
            "kl/k3": float((ratio - 1 - lr).mean()),
            "advantage/mean": float(a.mean()),
        }
    )
    return metrics
