"""Per-source mixing within a domain: shares follow the source weights for every priority strategy,
equal shares reproduce the single-source order exactly, a zero-weight source is never drawn, and a
sampler rebuilt on the same ledger (or from `state_dict()`) continues with the same draws."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from scalerl.curriculum.ledger.store import Ledger
from scalerl.curriculum.policy import CurriculumPolicy
from scalerl.curriculum.sampler import Sampler, SamplerStateError
from scalerl.curriculum.source_mix import SourceWalk, quotas
from scalerl.curriculum.strategy_config import StrategyConfig

from tests.support.ledger_data import problem

# math: 40 problems of source "a" and 10 of source "b"; code: one source
A = [problem(i, "math") for i in range(40)]
B = [problem(i, "math") for i in range(100, 110)]
CODE = [problem(i, "code") for i in range(12)]
PROBLEMS = A + B + CODE
SOURCE_OF = {p.prompt_id: "a" for p in A} | {p.prompt_id: "b" for p in B} | {p.prompt_id: "gen" for p in CODE}


def sampler(a: float, b: float, *, seed: int = 4, policy=None, ledger=None, problems=PROBLEMS, name="train"):
    return Sampler(problems, weights={"math": a + b, "code": 1}, seed=seed, policy=policy, ledger=ledger, name=name,
                   sources={"math": {"a": a, "b": b}, "code": {"gen": 1}}, source_of=SOURCE_OF)


def draws(s: Sampler, n_batches: int, size: int = 8) -> list[str]:
    return [p.prompt_id for _ in range(n_batches) for p in s.next_batch(size)]


def source_counts(pids: list[str]) -> Counter[str]:
    return Counter(SOURCE_OF[pid] for pid in pids if pid.startswith("math"))


def assert_share(pids: list[str], share_a: float) -> None:
    counts = source_counts(pids)
    n = counts["a"] + counts["b"]
    tolerance = 4 * math.sqrt(share_a * (1 - share_a) / n)  # 4 binomial standard deviations
    assert abs(counts["a"] / n - share_a) <= tolerance, (counts, share_a)


def priority(**cfg) -> CurriculumPolicy:
    return CurriculumPolicy(StrategyConfig.model_validate({"priority": cfg}), seed=3)


@pytest.mark.parametrize("a,b", [(3, 1), (1, 3), (1, 1), (5, 0.5)])
def test_source_shares_follow_the_weights_whatever_the_sizes(a, b):
    pids = draws(sampler(a, b), 100)  # ~400 math draws: source b (10 problems) runs many more epochs than a
    assert_share(pids, a / (a + b))
    for pid, n in Counter(pids).items():  # every problem of a source comes up about equally often
        src = [q for q in Counter(pids) if SOURCE_OF[q] == SOURCE_OF[pid]]
        mean = sum(Counter(pids)[q] for q in src) / len(src)
        assert abs(n - mean) <= max(2, 0.5 * mean), (pid, n, mean)


@pytest.mark.parametrize("cfg", [{"mode": "learnability"}, {"mode": "failure"}, {"mode": "pools"},
                                 {"mode": "uniform"}, {"mode": "failure", "replacement": True}])
def test_shares_hold_for_every_priority_strategy(tmp_path, cfg):
    with Ledger(tmp_path / "l.duckdb") as led:
        led.upsert_problems(PROBLEMS)
        led.record_attempts([{"prompt_id": p.prompt_id, "domain": "math", "step": 1, "sample_index": i,
                              "status": "correct" if i < 7 else "wrong"} for p in A for i in range(8)])
        pids = draws(sampler(1, 3, ledger=led, policy=priority(**cfg)), 60)
    assert_share(pids, 0.25)


def test_equal_weight_per_problem_reproduces_the_single_source_order_exactly():
    equal = [problem(i, "math") for i in range(40, 50)]  # a and b both 10 problems, equal weights
    problems = A[:10] + equal + CODE
    mixed = Sampler(problems, weights={"math": 2, "code": 1}, seed=9,
                    sources={"math": {"a": 1, "b": 1}, "code": {"gen": 1}},
                    source_of=SOURCE_OF | {p.prompt_id: "b" for p in equal})
    plain = Sampler(problems, weights={"math": 2, "code": 1}, seed=9)
    assert draws(mixed, 20) == draws(plain, 20)
    one_source = Sampler(PROBLEMS, weights={"math": 2, "code": 1}, seed=9, sources={"math": {"x": 2}, "code": {"x": 1}},
                         source_of={p.prompt_id: "x" for p in PROBLEMS})
    assert draws(one_source, 20) == draws(Sampler(PROBLEMS, weights={"math": 2, "code": 1}, seed=9), 20)
    assert "sources" not in one_source.state_dict()["domains"]["math"]  # the stored state is today's too


def test_a_zero_weight_source_is_never_drawn():
    pids = draws(sampler(2, 0), 40)
    assert source_counts(pids) == Counter({"a": sum(1 for p in pids if p.startswith("math"))})
    pids = draws(sampler(2, 0, policy=priority(mode="failure", replacement=True)), 20)
    assert pids and all(SOURCE_OF[pid] != "b" for pid in pids)
    with pytest.raises(ValueError, match=r"source weight for math/'b'"):
        sampler(1, -1)
    with pytest.raises(ValueError, match=r"source weight for math/'b'"):
        sampler(1, math.inf)


def test_resume_from_the_ledger_and_from_state_dict_continue_the_same_draws(tmp_path):
    expected = draws(sampler(3, 1), 30)
    got, path = [], tmp_path / "run.duckdb"
    for n in (7, 11, 12):  # two restarts on the same ledger, each mid-epoch
        with Ledger(path) as led:
            got += draws(sampler(3, 1, ledger=led), n)
    assert got == expected
    a = sampler(3, 1)
    draws(a, 9)
    b = sampler(3, 1)
    b.load_state_dict(a.state_dict())
    assert draws(a, 15) == draws(b, 15)
    with Ledger(path) as led, pytest.raises(SamplerStateError, match="fingerprint"):
        sampler(2, 2, ledger=led)  # same domain weight, other source weights: not this run's stored state


def test_resume_with_a_priority_strategy_continues_the_same_draws(tmp_path):
    with Ledger(tmp_path / "ref.duckdb") as ref:
        expected = draws(sampler(3, 1, ledger=ref, policy=priority(mode="failure")), 12)
    got = []
    with Ledger(tmp_path / "run.duckdb") as led:
        got += draws(sampler(3, 1, ledger=led, policy=priority(mode="failure")), 5)
    with Ledger(tmp_path / "run.duckdb") as led:
        got += draws(sampler(3, 1, ledger=led, policy=priority(mode="failure")), 7)
    assert got == expected


def test_retired_problems_leave_the_selection_and_the_shares_hold():
    s = sampler(1, 1)
    s.retire([p.prompt_id for p in B[:6]])  # b keeps 4 active problems, a 40: still 50 / 50
    pids = draws(s, 60)
    assert not {p.prompt_id for p in B[:6]} & set(pids)
    assert_share(pids, 0.5)


def test_quotas_carry_the_fraction_and_walks_never_repeat_within_a_take():
    takes, carry = quotas({"a": 1, "b": 3}, {"a": 40, "b": 10}, {"a": 0.0, "b": 0.0})
    assert takes == {"a": 3, "b": 10} and carry == pytest.approx({"a": 1 / 3, "b": 0.0})
    total = {"a": 0, "b": 0}
    for _ in range(30):
        takes, carry = quotas({"a": 1, "b": 3}, {"a": 40, "b": 10}, carry)
        total = {s: total[s] + takes[s] for s in total}
    assert total == {"a": 100, "b": 300}  # exact in the long run
    walk = SourceWalk([f"p{i}" for i in range(7)], "k")
    start = 0
    for _ in range(10):
        taken, end = walk.collect(start, lambda pid: pid != "p3", n=6)
        assert len(set(taken)) == 6 and "p3" not in taken
        assert walk.collect(start, lambda pid: pid != "p3", end=end)[0] == taken
        start = end
