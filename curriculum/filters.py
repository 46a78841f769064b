"""The zero-variance filter of ScaleRL: a pure function returning its statistics, and its test of one group
(`has_variance`) for callers that need only the flags. The retirement rule
(no-positive resampling) is the ledger's: `scalerl.curriculum.ledger.retirement`.

Zero-variance filtering (ScaleRL §3, "zero-variance filtering"): a group whose rewards are all equal
has zero advantage for every sample, so it contributes nothing but noise to the batch statistics. It is
dropped from the *effective* batch; nothing is resampled, so the batch shrinks and the fraction dropped
is reported (`ZeroVarianceStats.frac_dropped`, the quantity TRL logs as `frac_reward_zero_std`).
A group of one sample is zero-variance by definition and is dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, runtime_checkable


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


def has_variance(rewards: Sequence[float], *, atol: float = 0.0) -> bool:
    """The filter's test of one group: its rewards are not all equal (max − min > atol), none is NaN."""
    values = [float(r) for r in rewards]
    return bool(values) and not any(math.isnan(r) for r in values) and max(values) - min(values) > atol


def zero_variance_filter(groups: Sequence[G], *, atol: float = 0.0) -> tuple[list[G], ZeroVarianceStats]:
    """Keep the groups whose rewards are not all equal (`has_variance`); order is preserved."""
    stats = ZeroVarianceStats(groups_in=len(groups))
    kept: list[G] = []
    for group in groups:
        rewards = [float(r) for r in group.rewards]
        stats.samples_in += len(rewards)
        if has_variance(rewards, atol=atol):
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
