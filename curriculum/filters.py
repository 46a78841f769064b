"""The ScaleRL data filters: the zero-variance filter (a pure function returning its statistics) and
the retirement rule that the ledger applies as it records attempts (its one implementation).

Zero-variance filtering (ScaleRL §3, "zero-variance filtering"): a group whose rewards are all equal
has zero advantage for every sample, so it contributes nothing but noise to the batch statistics. It is
dropped from the *effective* batch; nothing is resampled, so the batch shrinks and the fraction dropped
is reported (`ZeroVarianceStats.frac_dropped`, the quantity TRL logs as `frac_reward_zero_std`).
A group of one sample is zero-variance by definition and is dropped.

No-positive resampling (ScaleRL §3, after Polaris, An et al. 2025): "maintain a history of pass rates
and permanently remove from subsequent epochs any prompt with pass rate ≥ 0.9". Here:
- the pass rate is `passed / scored` over a *window* (`RetirementConfig.window`):
  `"group"` (default) — the samples of the prompt's most recent group, i.e. the samples drawn for it at
  one step; the paper samples each prompt once per epoch, so this is its pass rate in its latest epoch
  and a prompt retires as soon as any one group reaches the threshold.
  `"all"` — every sample the prompt has ever had (a cumulative rate: slower to retire a prompt the
  policy has only recently learned).
- a sample passes when its verdict status is `correct` (shaped rewards never decide retirement).
- retirement is permanent: a later, worse group never brings a retired prompt back.
- a window with fewer than `min_samples` scored samples never retires a prompt (guards against a group
  recorded in pieces retiring on its first few samples).

Samples whose verification *failed* (`status = error`) are not scored: the ledger leaves them out of
the window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar, runtime_checkable

from pydantic import Field

from scalerl_env.records import Strict


@runtime_checkable
class Group(Protocol):
    """What the filters need from a group: the prompt, its domain and one reward per sample."""

    prompt_id: str
    domain: str
    rewards: Sequence[float]


@dataclass
class RewardGroup:
    """A plain `Group`; `correct` (one flag per sample) is optional and wins over rewards for pass rates."""

    prompt_id: str
    domain: str
    rewards: Sequence[float]
    correct: Sequence[bool] | None = None


class RetirementConfig(Strict):
    """No-positive resampling settings (ScaleRL: threshold 0.9, retired for good)."""

    enabled: bool = Field(default=True, description="off: nothing is ever retired (the paper's ablation)")
    threshold: float = Field(default=0.9, gt=0.0, le=1.0, description="retire when pass rate >= this")
    window: Literal["group", "all"] = Field(
        default="group", description="'group': the latest group's samples (one epoch); 'all': every sample"
    )
    min_samples: int = Field(default=1, ge=1, description="a window needs this many scored samples")


def passes(correct: int, scored: int, config: RetirementConfig) -> bool:
    """The retirement rule on one window's counts (the ledger applies the same function)."""
    return config.enabled and scored >= config.min_samples and correct / scored >= config.threshold


@dataclass
class ZeroVarianceStats:
    groups_in: int = 0
    groups_kept: int = 0
    samples_in: int = 0
    samples_kept: int = 0
    dropped_all_pass: int = 0  # every sample got the group's top reward > 0 ("too easy")
    dropped_all_fail: int = 0  # every sample got the same reward <= 0 ("too hard")
    dropped_by_domain: dict[str, int] = field(default_factory=dict)

    @property
    def groups_dropped(self) -> int:
        return self.groups_in - self.groups_kept

    @property
    def frac_dropped(self) -> float:
        """Fraction of groups dropped (0.0 for an empty batch)."""
        return self.groups_dropped / self.groups_in if self.groups_in else 0.0

    def metrics(self, prefix: str = "filter/zero_variance/") -> dict[str, float]:
        out = {"frac_dropped": self.frac_dropped, "groups_in": self.groups_in,
               "groups_kept": self.groups_kept, "samples_kept": self.samples_kept,
               "dropped_all_pass": self.dropped_all_pass, "dropped_all_fail": self.dropped_all_fail}
        out.update({f"dropped/{d}": n for d, n in sorted(self.dropped_by_domain.items())})
        return {prefix + k: float(v) for k, v in out.items()}


G = TypeVar("G", bound=Group)


def zero_variance_filter(groups: Sequence[G], *, atol: float = 0.0) -> tuple[list[G], ZeroVarianceStats]:
    """Keep the groups whose rewards are not all equal (max − min > atol); order is preserved."""
    stats = ZeroVarianceStats(groups_in=len(groups))
    kept: list[G] = []
    for group in groups:
        rewards = [float(r) for r in group.rewards]
        stats.samples_in += len(rewards)
        if rewards and not any(math.isnan(r) for r in rewards) and max(rewards) - min(rewards) > atol:
            kept.append(group)
            stats.samples_kept += len(rewards)
            continue
        stats.dropped_by_domain[group.domain] = stats.dropped_by_domain.get(group.domain, 0) + 1
        if rewards and rewards[0] > 0.0:
            stats.dropped_all_pass += 1
        else:
            stats.dropped_all_fail += 1
    stats.groups_kept = len(kept)
    return kept, stats
