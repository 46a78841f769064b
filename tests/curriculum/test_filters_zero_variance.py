"""Zero-variance filtering: all-equal groups leave the effective batch; nothing is resampled."""

from __future__ import annotations

import pytest
from scalerl.curriculum.filters import RewardGroup, zero_variance_filter


def g(pid: str, rewards: list[float], domain: str = "math") -> RewardGroup:
    return RewardGroup(prompt_id=pid, domain=domain, rewards=rewards)


def test_groups_with_all_equal_rewards_are_dropped_and_order_is_kept():
    groups = [g("a", [1, 0, 1]), g("b", [1, 1, 1]), g("c", [0, 0, 0], "code"), g("d", [0, 0, 1], "code")]
    kept, stats = zero_variance_filter(groups)
    assert [x.prompt_id for x in kept] == ["a", "d"]
    assert (stats.groups_in, stats.groups_kept, stats.groups_dropped) == (4, 2, 2)
    assert stats.frac_dropped == 0.5
    assert (stats.dropped_all_pass, stats.dropped_all_fail) == (1, 1)
    assert stats.dropped_by_domain == {"math": 1, "code": 1}
    assert (stats.samples_in, stats.samples_kept) == (12, 6)


def test_the_batch_shrinks_instead_of_being_refilled():
    groups = [g(str(i), [1.0] * 16) for i in range(47)] + [g("mixed", [1.0] * 15 + [0.0])]
    kept, stats = zero_variance_filter(groups)
    assert len(kept) == 1 and stats.frac_dropped == pytest.approx(47 / 48)


def test_shaped_rewards_count_as_variance_unless_within_atol():
    groups = [g("a", [0.5, 0.5000001]), g("b", [-1.0, -1.0])]
    assert [x.prompt_id for x in zero_variance_filter(groups)[0]] == ["a"]
    assert zero_variance_filter(groups, atol=1e-3)[0] == []


def test_single_sample_and_empty_groups_are_zero_variance():
    kept, stats = zero_variance_filter([g("one", [1.0]), g("none", [])])
    assert kept == [] and stats.groups_dropped == 2


def test_empty_batch_reports_zero_fraction_and_metrics_are_named():
    kept, stats = zero_variance_filter([])
    assert kept == [] and stats.frac_dropped == 0.0
    kept, stats = zero_variance_filter([g("a", [1, 1])])
    assert stats.metrics()["filter/zero_variance/frac_dropped"] == 1.0
    assert stats.metrics()["filter/zero_variance/dropped/math"] == 1.0
