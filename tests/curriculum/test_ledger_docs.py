"""Every SQL example in docs/ledger.md runs against a real ledger of a short simulated training run."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from scalerl.curriculum.ledger.store import Ledger
from scalerl.curriculum.sampler import Sampler

from tests.support.ledger_data import PROBLEMS

DOC = Path(__file__).resolve().parents[2] / "docs" / "ledger.md"
QUERIES = re.findall(r"```sql\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    rng = random.Random(0)
    with Ledger(tmp_path_factory.mktemp("docs") / "l.duckdb") as led:
        led.upsert_problems(PROBLEMS)
        sampler = Sampler(PROBLEMS, weights={"math": 1, "code": 1}, seed=0, ledger=led)
        skill = {p.prompt_id: rng.random() for p in PROBLEMS}
        for step in range(12):
            rows = []
            for problem in sampler.next_batch(8):
                for i in range(16):
                    ok = rng.random() < skill[problem.prompt_id] + step * 0.03
                    rows.append({"prompt_id": problem.prompt_id, "domain": problem.domain, "step": step,
                                 "sample_index": i, "status": "correct" if ok else "wrong",
                                 "truncated": rng.random() < 0.05})
            led.record_attempts(rows)
        yield led


def test_the_docs_hold_the_promised_examples():
    assert len(QUERIES) >= 6


@pytest.mark.parametrize("sql", QUERIES, ids=[f"q{i}" for i in range(len(QUERIES))])
def test_documented_query_runs_and_returns_rows(ledger, sql):
    some_prompt = next(iter(ledger.pass_rates()))
    result = ledger.query(sql.replace("PROMPT_ID", some_prompt))
    assert result.rows, sql
