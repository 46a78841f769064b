"""The PipelineRL-k / PPO-off-policy-k rules: admission, the EDF take rule, and the lag bound they give."""

from __future__ import annotations

import random

import pytest
from scalerl.trainer.rollout.lag_rules import admission_limit, choose_groups, must_take_version
from scalerl.trainer.rollout.simulation import SimConfig, _group, simulate


def test_admission_limits():
    assert admission_limit("pipeline", 0, 4, pushed_version=0) == 4  # synchronous: one batch at a time
    assert admission_limit("pipeline", 8, 4, pushed_version=3) == 48
    assert [admission_limit("ppo-offpolicy", 2, 4, v) for v in range(5)] == [8, 8, 16, 16, 24]
    with pytest.raises(ValueError, match="unknown pipeline mode"):
        admission_limit("async", 1, 4, 0)


def test_take_waits_for_a_group_at_its_deadline():
    # trainer at version 5 with k = 2: a version-3 group must be trained now; it is not scored yet.
    scored = [_group(i, 5, 1) for i in range(4)]
    outstanding = {i: 5 for i in range(4)} | {9: 3}
    assert choose_groups(scored, outstanding, 2, must_take_version("pipeline", 2, 5)) is None
    scored.append(_group(9, 3, 1))
    batch = choose_groups(scored, outstanding, 2, must_take_version("pipeline", 2, 5))
    assert batch is not None and batch[0].group_id == 9


def test_take_skips_a_straggler_that_still_has_slack():
    scored = [_group(i, 5, 1) for i in range(4)]
    outstanding = {i: 5 for i in range(4)} | {9: 4}  # version 4, k = 2, trainer at 5: deadline is step 6
    batch = choose_groups(scored, outstanding, 2, must_take_version("pipeline", 2, 5))
    assert batch is not None and {g.group_id for g in batch} == {0, 1}


@pytest.mark.parametrize("mode,k", [("pipeline", 0), ("pipeline", 1), ("pipeline", 3), ("pipeline", 8),
                                    ("ppo-offpolicy", 4)])
def test_lag_bound_holds_under_long_tailed_finishing(mode, k):
    """Random long-tailed generation times, the real rule functions: no trained group is older than k."""
    for seed in range(3):
        result = simulate(SimConfig(mode=mode, k=k, steps=25, prompts_per_step=6, samples_per_prompt=4,
                                    slots=32, sigma=1.2, seed=seed))
        assert result.max_lag <= (k if mode == "pipeline" else k - 1)


def test_pipelining_raises_generator_utilization_in_simulation():
    sync = simulate(SimConfig(mode="pipeline", k=0, steps=30))
    pipe = simulate(SimConfig(mode="pipeline", k=8, steps=30))
    assert pipe.generator_utilization > 0.95 > sync.generator_utilization
    assert pipe.samples_per_s > 2 * sync.samples_per_s


def test_choose_groups_property_random_states():
    """Whatever the state, a returned batch is the n oldest scored groups and leaves a feasible rest."""
    rng = random.Random(0)
    for _ in range(300):
        s, k, n = rng.randint(0, 20), rng.randint(0, 5), rng.randint(1, 4)
        outstanding = {gid: rng.randint(max(0, s - k), s) for gid in range(rng.randint(0, 12))}
        scored = [_group(gid, v, 1) for gid, v in outstanding.items() if rng.random() < 0.6]
        batch = choose_groups(scored, outstanding, n, s - k)
        if batch is None:
            continue
        assert len(batch) == n
        oldest = sorted(scored, key=lambda g: (g.submitted_version, g.group_id))[:n]
        assert [g.group_id for g in batch] == [g.group_id for g in oldest]
        left = sorted(v for gid, v in outstanding.items() if gid not in {g.group_id for g in batch})
        assert all(i + 1 <= (v - (s - k)) * n for i, v in enumerate(left))
