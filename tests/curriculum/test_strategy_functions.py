"""The curriculum strategies as pure functions (hand-made inputs) and the ledger counts they read
(hand-made groups in a real DuckDB ledger)."""

from __future__ import annotations

import random

import pytest
from scalerl.curriculum import strategies as st
from scalerl.curriculum.ledger import counts as lc
from scalerl.curriculum.ledger.retirement import RetirementConfig
from scalerl.curriculum.ledger.store import Ledger
from scalerl.curriculum.strategy_config import (
    BenchConfig,
    MixingConfig,
    PriorityConfig,
    SkipConfig,
    StageConfig,
    StrategyConfig,
)


def group(ledger: Ledger, pid: str, step: int, passed: int, n: int = 8, domain: str = "math") -> None:
    ledger.record_attempts([{"prompt_id": pid, "domain": domain, "step": step, "sample_index": i,
                             "status": "correct" if i < passed else "wrong"} for i in range(n)])


# ------------------------------------------------------------------------------ zero variance
def test_zero_variance_modes():
    flags = [True, False, True, False, False, False]
    assert st.ZERO_VARIANCE_MODES["shrink"](flags, 6, 1 / 3).keep == [0, 2]
    assert st.ZERO_VARIANCE_MODES["keep"](flags, 6, 1 / 3).keep == list(range(6))
    refill = st.ZERO_VARIANCE_MODES["refill"](flags, 6, 1 / 3)
    assert (refill.keep, refill.want_more) == ([0, 2], 4)
    # 2 of 6 informative is not more than a third: POLARIS skips the batch ...
    assert st.ZERO_VARIANCE_MODES["duplicate"](flags, 6, 1 / 3).skipped_step
    # ... 3 of 6 is: the informative groups are repeated in order until the batch is full
    dup = st.ZERO_VARIANCE_MODES["duplicate"]([True, True, False, True, False, False], 6, 1 / 3)
    assert (dup.keep, dup.duplicate, dup.skipped_step) == ([0, 1, 3], [0, 1, 3], False)


# ------------------------------------------------------------------------------ priority
def test_priority_weights_learnability_failure_and_pools():
    rates = {"solved": 1.0, "half": 0.5, "hard": 0.1}
    learn = st.priority_weights(rates, PriorityConfig(mode="learnability", floor=0.0))
    assert learn == pytest.approx({"solved": 0.0, "half": 0.25, "hard": 0.09})
    fail = st.priority_weights(rates, PriorityConfig(mode="failure", floor=0.0))
    assert fail == pytest.approx({"solved": 0.0, "half": 0.5, "hard": 0.9})
    # prime-rl pools: hard <= 0.25 (0.2), normal <= 0.75 (1.0), easy (0.2), split over each pool's members
    pools = st.priority_weights({"a": 0.1, "b": 0.2, "c": 0.5, "d": 0.9}, PriorityConfig(mode="pools", floor=0.0))
    assert pools == pytest.approx({"a": 0.1, "b": 0.1, "c": 1.0, "d": 0.2})
    assert st.priority_weights(rates, PriorityConfig(mode="uniform")) == pytest.approx(
        {k: 1.01 for k in rates})


def test_pass_rate_estimate_prefers_samples_then_prior_then_default():
    assert st.pass_rate_estimate(3, 4, 0.1, 0.5) == 0.75
    assert st.pass_rate_estimate(0, 0, 0.1, 0.5) == 0.1
    assert st.pass_rate_estimate(0, 0, None, 0.5) == 0.5


def test_weighted_pick_follows_the_weights_and_is_seeded():
    rng = random.Random(0)
    picks = [st.weighted_pick(["a", "b"], {"a": 0.9, "b": 0.1}, rng) for _ in range(2000)]
    assert 0.85 < picks.count("a") / 2000 < 0.95
    assert st.weighted_pick(["a", "b"], {"a": 0, "b": 0}, random.Random(1)) in ("a", "b")
    assert [st.weighted_pick(["a", "b", "c"], {}, random.Random(s)) for s in range(5)] == \
        [st.weighted_pick(["a", "b", "c"], {}, random.Random(s)) for s in range(5)]


# ------------------------------------------------------------------------------ retirement extras
def test_bench_rules_last_k_easy_and_hard_side():
    cfg = BenchConfig(last_k=2, easy_at=0.9, hard_at=0.0, min_samples=8)
    assert st.benched((16, 16), cfg) == "easy"
    assert st.benched((0, 16), cfg) == "hard"
    assert st.benched((8, 16), cfg) is None
    assert st.benched((0, 4), cfg) is None  # too few samples
    assert st.benched((0, 16), BenchConfig()) is None  # off by default


def test_readmission_on_resume_is_a_seeded_fraction():
    retired = [f"p{i}" for i in range(20)]
    first = st.readmitted_on_resume(retired, 0.1, seed=0, resume_index=1)
    assert len(first) == 2 and set(first) <= set(retired)
    assert first == st.readmitted_on_resume(list(reversed(retired)), 0.1, seed=0, resume_index=1)
    assert st.readmitted_on_resume(retired, 0.1, seed=0, resume_index=2) != first or len(retired) < 3
    assert st.readmitted_on_resume([], 0.5, seed=0, resume_index=1) == []


# ------------------------------------------------------------------------------ GRESO
def test_greso_skip_probability_grows_with_the_streak():
    assert st.greso_skip_probability(0, True, 0.5, 0.5) == 0.0
    assert st.greso_skip_probability(1, True, 0.5, 0.9) == pytest.approx(0.5)
    assert st.greso_skip_probability(3, False, 0.5, 0.9) == pytest.approx(1 - 0.9 ** 3)
    assert st.SKIPS["none"](5, True, 0.5, 0.5) == 0.0


def test_greso_exploration_probabilities_follow_the_targets():
    cfg = SkipConfig(mode="greso", p_initial=0.5, p_step=0.1, target_easy=0.2, target_hard=0.2)
    # every group all-correct: easy share 1.0 >= target -> p_easy falls; hard share 0 < target -> p_hard rises
    p_easy, p_hard = st.greso_probabilities([(4, 0, 4)] * 3, cfg)
    assert p_easy == pytest.approx(0.2) and p_hard == pytest.approx(0.8)
    p_easy, _ = st.greso_probabilities([(4, 0, 4)] * 10, cfg)
    assert p_easy == pytest.approx(cfg.p_min)
    assert st.greso_probabilities([], cfg) == (0.5, 0.5)


# ------------------------------------------------------------------------------ mixing and stages
def test_learning_progress_mix():
    cfg = MixingConfig(mode="learning_progress", ucb=0.0, min_weight=0.05)
    weights = st.learning_progress_mix({"math": 1.0, "code": 1.0}, {"math": (0.5, 10), "code": (0.0, 10)}, cfg)
    assert weights == {"math": 0.5, "code": 0.05}
    assert st.learning_progress_mix({"math": 1.0, "code": 2.0}, {}, cfg) == {"math": 1.0, "code": 2.0}
    bonus = st.learning_progress_mix({"a": 1.0, "b": 1.0}, {"a": (0.2, 100), "b": (0.2, 1)},
                                     MixingConfig(mode="learning_progress", ucb=1.0))
    assert bonus["b"] > bonus["a"]  # the less-tried domain gets the larger exploration bonus
    assert st.MIXINGS["fixed"]({"a": 2.0}, {"a": (0.5, 3)}, cfg) == {"a": 2.0}


def test_stages_and_levels():
    stages = [StageConfig(until_batch=10, min_prior=0.5), StageConfig(until_batch=20, max_prior=0.5), StageConfig()]
    assert [st.stage_index(b, stages) for b in (0, 9, 10, 19, 20, 500)] == [0, 0, 1, 1, 2, 2]
    assert st.stage_index(7, []) == 0
    assert st.in_level(0.7, stages[0]) and not st.in_level(0.3, stages[0]) and not st.in_level(None, stages[0])
    assert st.in_level(None, stages[2])


def test_strategy_config_validation():
    assert not StrategyConfig().sampler_active
    assert StrategyConfig(skip=SkipConfig(mode="greso")).sampler_active
    with pytest.raises(ValueError, match="until_batch"):
        StrategyConfig(stages=[StageConfig(), StageConfig(until_batch=3)])
    with pytest.raises(ValueError, match="prior_ledger"):
        StrategyConfig(stages=[StageConfig(min_prior=0.5)])
    with pytest.raises(ValueError, match="pools"):
        PriorityConfig(mode="pools", pools=[{"max_pass_rate": 0.5, "weight": 1.0}])
    with pytest.raises(ValueError, match="extra"):
        StrategyConfig.model_validate({"skip": {"mode": "greso", "typo": 1}})


# ------------------------------------------------------------------------------ ledger counts
@pytest.fixture
def ledger(tmp_path):
    with Ledger(tmp_path / "l.duckdb", retirement=RetirementConfig(enabled=False)) as led:
        #          step:   1   2   3   4
        for step, (a, b, c) in enumerate([(4, 0, 8), (8, 0, 8), (8, 0, 2), (8, 3, 8)], start=1):
            group(led, "a", step, a)  # mixed, then all-correct x3
            group(led, "b", step, b, domain="code")  # mostly all-wrong; mixed at step 4
            group(led, "c", step, c)  # all-correct, all-correct, mixed, all-correct
        yield led


def test_last_k_windows(ledger):
    assert lc.last_k_windows(ledger, 2) == {"a": (16, 16), "b": (3, 16), "c": (10, 16)}
    assert lc.last_k_windows(ledger, 10)["a"] == (28, 32)


def test_zero_variance_streaks(ledger):
    assert lc.zero_variance_streaks(ledger) == {"a": (3, True), "c": (1, True)}  # b's latest group had variance


def test_step_outcomes(ledger):
    assert lc.step_outcomes(ledger) == [(1, 1, 3), (2, 1, 3), (1, 1, 3), (2, 0, 3)]


def test_domain_progress(ledger):
    progress = lc.domain_progress(ledger, 1)
    assert progress["code"] == pytest.approx((2 * 3 / 8 * 5 / 8, 4))  # b's latest group: 3/8
    assert progress["math"][1] == 8


def test_stage_pass_rates_count_groups_in_step_order(ledger):
    # three groups per step: groups 1-6 are steps 1-2; 12 groups recorded in all
    rates, recorded = lc.stage_pass_rates(ledger, 0, 6)
    assert rates == pytest.approx({"a": 0.75, "b": 0.0, "c": 1.0}) and recorded == 12
    # a range ending inside a step takes the whole step that starts in it (groups 4-5: step 2)
    assert lc.stage_pass_rates(ledger, 3, 5)[0] == pytest.approx({"a": 1.0, "b": 0.0, "c": 1.0})
    assert lc.stage_pass_rates(ledger, 12, 15) == ({}, 12)
