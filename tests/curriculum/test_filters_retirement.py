"""No-positive resampling (the ledger's one implementation): prompts whose window pass rate reaches the
threshold retire for good as their attempts are recorded."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from scalerl.curriculum.ledger.retirement import RetirementConfig, passes
from scalerl.curriculum.ledger.store import Ledger


def rows(pid: str, n_pass: int, n: int = 16, step: int = 1, reward: float | None = None) -> dict[str, list]:
    status = ["correct"] * n_pass + ["wrong"] * (n - n_pass)
    out = {"prompt_id": [pid] * n, "domain": ["math"] * n, "step": [step] * n, "status": status}
    if reward is not None:
        out["reward"] = [reward] * n
    return out


def retired_after(tmp_path, batches, config: RetirementConfig | None = None) -> set[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    with Ledger(tmp_path / "l.duckdb", retirement=config or RetirementConfig()) as ledger:
        for batch in batches:
            ledger.record_attempts(batch)
        return set(ledger.retired_ids())


def test_threshold_is_inclusive_at_0_9(tmp_path):
    batches = [rows("a", 9, 10), rows("b", 8, 10), rows("c", 15), rows("d", 14)]
    assert retired_after(tmp_path, batches) == {"a", "c"}
    assert passes(90, 100, RetirementConfig()) and not passes(89, 100, RetirementConfig())


def test_retirement_is_permanent(tmp_path):
    assert retired_after(tmp_path, [rows("a", 16, step=1), rows("a", 0, step=2)]) == {"a"}


def test_group_window_uses_only_the_latest_group_all_window_uses_history(tmp_path):
    history = [rows("a", 0, 32, step=1), rows("a", 16, step=2)]
    assert retired_after(tmp_path / "g", history) == {"a"}
    assert retired_after(tmp_path / "all", history, RetirementConfig(window="all")) == set()
    passing_history = [rows("a", 30, 32, step=1), rows("a", 16, step=2)]
    assert retired_after(tmp_path / "all2", passing_history, RetirementConfig(window="all")) == {"a"}


def test_correct_statuses_decide_not_shaped_rewards(tmp_path):
    assert retired_after(tmp_path, [rows("a", 0, reward=0.2)]) == set()


def test_min_samples_and_disabled_config_retire_nothing(tmp_path):
    assert retired_after(tmp_path / "m", [rows("a", 3, 3)], RetirementConfig(min_samples=4)) == set()
    assert retired_after(tmp_path / "d", [rows("a", 16)], RetirementConfig(enabled=False)) == set()


def test_config_rejects_out_of_range_and_unknown_fields():
    with pytest.raises(ValidationError):
        RetirementConfig(threshold=1.5)
    with pytest.raises(ValidationError, match="treshold"):
        RetirementConfig(treshold=0.8)
