"""Every SQL example in docs/curriculum.md runs against the ledger of a simulated run with strategies on
(learnability priority, GRESO skipping, probe re-admission, learning-progress mixing) and returns rows."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from scalerl.curriculum.ledger.store import Ledger
from scalerl.curriculum.policy import CurriculumPolicy
from scalerl.curriculum.sampler import Sampler
from scalerl.curriculum.strategy_config import StrategyConfig

from tests.support.ledger_data import PROBLEMS

DOC = Path(__file__).resolve().parents[2] / "docs" / "curriculum.md"
QUERIES = re.findall(r"```sql\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
STRATEGIES = {"priority": {"mode": "learnability"}, "skip": {"mode": "greso"}, "mixing": {"mode": "learning_progress"},
              "readmission": {"mode": "probe", "probe_probability": 0.2}}


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    rng = random.Random(0)
    skill = {p.prompt_id: (int(p.prompt_id[-3:]) % 5) / 4 for p in PROBLEMS}  # 0, .25, .5, .75, 1
    with Ledger(tmp_path_factory.mktemp("docs") / "l.duckdb") as led:
        led.upsert_problems(PROBLEMS)
        policy = CurriculumPolicy(StrategyConfig.model_validate(STRATEGIES), seed=0)
        sampler = Sampler(PROBLEMS, weights={"math": 1, "code": 1}, seed=0, ledger=led, policy=policy)
        for step in range(1, 13):
            led.record_attempts([{"prompt_id": p.prompt_id, "domain": p.domain, "step": step, "sample_index": i,
                                  "status": "correct" if rng.random() < skill[p.prompt_id] else "wrong",
                                  "completion_tokens": (8 if step <= 6 else 16) + i, "truncated": i == 7}
                                 for p in sampler.next_batch(8) for i in range(8)])
        yield led


def test_the_docs_hold_one_query_per_strategy():
    assert len(QUERIES) >= 8


@pytest.mark.parametrize("sql", QUERIES, ids=[f"q{i}" for i in range(len(QUERIES))])
def test_documented_query_runs_and_returns_rows(ledger, sql):
    assert ledger.query(sql).rows, sql
