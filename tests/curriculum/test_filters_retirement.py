"""No-positive resampling: prompts whose window pass rate reaches the threshold retire for good."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from curriculum.filters import RetirementConfig, RewardGroup, no_positive_resampling, passes


def g(pid: str, n_pass: int, n: int = 16, correct: bool = False) -> RewardGroup:
    rewards = [1.0] * n_pass + [0.0] * (n - n_pass)
    return RewardGroup(pid, "math", rewards, correct=[r > 0 for r in rewards] if correct else None)


def test_threshold_is_inclusive_at_0_9():
    retired, stats = no_positive_resampling([g("a", 9, 10), g("b", 8, 10), g("c", 15), g("d", 14)])
    assert retired == {"a", "c"} and stats.newly_retired == ["a", "c"]
    assert passes(90, 100, RetirementConfig()) and not passes(89, 100, RetirementConfig())


def test_retirement_is_permanent_and_inputs_are_not_mutated():
    before = frozenset({"a"})
    retired, stats = no_positive_resampling([g("a", 0), g("b", 16)], retired=before)
    assert retired == {"a", "b"} and before == {"a"}
    assert stats.already_retired == 1 and stats.newly_retired == ["b"] and stats.retired_total == 2


def test_group_window_uses_only_the_new_group_all_window_uses_history():
    history = {"a": (0, 32)}  # failed 32 times before
    assert no_positive_resampling([g("a", 16)], history=history)[0] == {"a"}
    cfg = RetirementConfig(window="all")
    assert no_positive_resampling([g("a", 16)], history=history, config=cfg)[0] == frozenset()
    assert no_positive_resampling([g("a", 16)], history={"a": (30, 32)}, config=cfg)[0] == {"a"}


def test_correct_flags_win_over_rewards():
    group = RewardGroup("a", "math", [0.2] * 16, correct=[False] * 16)  # shaped rewards > 0 but all wrong
    assert no_positive_resampling([group])[0] == frozenset()
    assert no_positive_resampling([RewardGroup("b", "math", [0.2] * 16)])[0] == {"b"}


def test_min_samples_and_disabled_config_retire_nothing():
    assert no_positive_resampling([g("a", 3, 3)], config=RetirementConfig(min_samples=4))[0] == frozenset()
    assert no_positive_resampling([g("a", 16)], config=RetirementConfig(enabled=False))[0] == frozenset()


def test_config_rejects_out_of_range_and_unknown_fields():
    with pytest.raises(ValidationError):
        RetirementConfig(threshold=1.5)
    with pytest.raises(ValidationError, match="treshold"):
        RetirementConfig(treshold=0.8)
