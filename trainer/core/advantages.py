"""Group-centred advantages with the ScaleRL normalization switch.

For sample i of prompt group g with reward r_i:

    A_i = r_i − mean_{j∈g}(r_j)                      (group-centred; GRPO/RLOO-style baseline)
    batch  (ScaleRL): Â_i = A_i / (std(A over the effective batch) + eps)
    prompt (GRPO):    Â_i = A_i / (std_{j∈g}(r_j) + eps)
    none   (Dr. GRPO): Â_i = A_i

A group whose rewards are all equal ("zero-variance") has A_i = 0 for all its samples; it is flagged
so the zero-variance filter (`scalerl.curriculum.filters`) can drop it. The "effective batch" of the `batch` std is
the samples of the groups that are *not* zero-variance (they are what remains after the filter);
set `std_includes_zero_variance=True` to take the std over every sample instead (the filter-off
ablation). Standard deviations are population (ddof 0) ones.

Return value of `compute_advantages` (a NamedTuple, so it unpacks as a 3-tuple):
`advantages` float32 `[num_samples]`, `zero_variance` bool `[num_samples]` (True where the sample's
group has all-equal rewards), `metrics` dict of floats.

Guarantees: zero-variance groups get exactly 0; if every group is zero-variance, all advantages are 0
(no division by a zero std); group ids may be any integers in any order.
Non-guarantees: no reward clipping or per-domain normalization.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from scalerl.trainer.core.recipe_config import AdvantageConfig
from torch import Tensor


class AdvantageResult(NamedTuple):
    advantages: Tensor
    zero_variance: Tensor
    metrics: dict[str, float]


def _group_stats(values: Tensor, inverse: Tensor, n_groups: int) -> tuple[Tensor, Tensor]:
    """Per-sample group mean and population std of `values` (float64)."""
    counts = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, inverse, torch.ones_like(values))
    sums = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, inverse, values)
    mean = (sums / counts)[inverse]
    sq = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, inverse, (values - mean) ** 2)
    return mean, (sq / counts).sqrt()[inverse]


def compute_advantages(rewards: Tensor, group_ids: Tensor, cfg: AdvantageConfig,
                       zero_variance: Tensor | None = None) -> AdvantageResult:
    """Advantages per sample, the zero-variance flags, and metrics (see the module docstring).

    `zero_variance` (bool per sample), when the caller has already decided which groups are
    zero-variance (the loop's filter does), is used as given instead of being recomputed."""
    if rewards.ndim != 1 or rewards.shape != group_ids.shape:
        raise ValueError(
            f"rewards and group_ids must be 1-D of equal length, got {tuple(rewards.shape)} "
            f"and {tuple(group_ids.shape)}"
        )
    if rewards.numel() == 0:
        raise ValueError("compute_advantages needs at least one sample")
    r = rewards.detach().to("cpu", torch.float64)
    if not torch.isfinite(r).all():
        raise ValueError("rewards contain NaN or inf")
    _, inverse = torch.unique(group_ids.cpu(), return_inverse=True)
    n_groups = int(inverse.max()) + 1
    mean, group_std = _group_stats(r, inverse, n_groups)
    centred = r - mean
    # Exact equality of rewards, not std < tol: rewards are table values, and the filter needs "all equal".
    if zero_variance is None:
        group_max = torch.full((n_groups,), -torch.inf, dtype=torch.float64).scatter_reduce(0, inverse, r, "amax")
        group_min = torch.full((n_groups,), torch.inf, dtype=torch.float64).scatter_reduce(0, inverse, r, "amin")
        zero_var = (group_max == group_min)[inverse]
    else:
        zero_var = zero_variance.to("cpu", torch.bool)
    group_zero_var = torch.zeros(n_groups, dtype=torch.bool).index_fill_(0, inverse[zero_var], True)
    centred = torch.where(zero_var, torch.zeros_like(centred), centred)
    scale = _scale(centred, group_std, zero_var, cfg)
    adv = centred / scale
    metrics = {
        "reward/mean": float(r.mean()),
        "reward/std": float(r.std(unbiased=False)),
        "groups": float(n_groups),
        "frac_reward_zero_std": float(group_zero_var.double().mean()),
        "advantage/std_divisor": float(scale.max()) if cfg.normalization == "batch" else float("nan"),
        "advantage/abs_mean": float(adv.abs().mean()),
    }
    return AdvantageResult(adv.to(torch.float32).to(rewards.device), zero_var.to(rewards.device), metrics)


def _scale(centred: Tensor, group_std: Tensor, zero_var: Tensor, cfg: AdvantageConfig) -> Tensor:
    ones = torch.ones_like(centred)
    if cfg.normalization == "none":
        return ones
    if cfg.normalization == "prompt":
        return torch.where(zero_var, ones, group_std + cfg.eps)
    pool = centred if cfg.std_includes_zero_variance else centred[~zero_var]
    if pool.numel() == 0:
        return ones
    return ones * (pool.std(unbiased=False) + cfg.eps)
