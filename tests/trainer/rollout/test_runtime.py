"""`LocalRuntime` contracts with a fake engine and a fake rollout worker (tests/support/fake_generation.py):
admission, the lag bound, error propagation from the scorer and the engine, close, stats."""

from __future__ import annotations

import threading

import pytest
from scalerl.trainer.engines.base import EngineStats
from scalerl.trainer.rollout.lag_rules import admission_limit
from scalerl.trainer.rollout.runtime import LocalRuntime

from tests.support.fake_generation import FakeEngine, FakeWorker, long_tailed_ticks, wait_until

P = 3  # prompts per step


@pytest.fixture
def make_runtime():
    made: list[LocalRuntime] = []

    def make(engine: FakeEngine, worker: FakeWorker | None = None, *, mode: str = "pipeline", k: int = 2,
             version: int = 0) -> LocalRuntime:
        rt = LocalRuntime(engine, worker or FakeWorker(), mode=mode, k=k, prompts_per_step=P)
        made.append(rt)
        rt.start(version)
        return rt

    yield make
    for rt in made:
        rt.close()


@pytest.mark.parametrize("mode,k,pushes", [("pipeline", 0, [1, 2]), ("pipeline", 2, [1, 3]),
                                           ("ppo-offpolicy", 2, [1, 2, 4])])
def test_admission_stops_exactly_at_the_limit_of_the_pushed_version(make_runtime, mode, k, pushes):
    engine = FakeEngine()
    engine.hold.set()  # nothing finishes, nothing is taken: only pushes open admission
    rt = make_runtime(engine, mode=mode, k=k)
    for version in [0, *pushes]:
        if version:
            rt.push_weights({}, version)
        limit = admission_limit(mode, k, P, version)
        assert wait_until(lambda n=limit: engine.submitted() >= n, 10), (version, engine.submitted(), limit)
        threading.Event().wait(0.15)  # room for an over-admission to show
        assert engine.submitted() == limit, f"version {version}: {engine.submitted()} submitted, limit {limit}"


@pytest.mark.parametrize("mode,k", [("pipeline", 1), ("ppo-offpolicy", 2)])
def test_admission_never_exceeds_the_limit_while_training(make_runtime, mode, k):
    engine = FakeEngine(ticks=long_tailed_ticks(seed=1))
    rt = make_runtime(engine, mode=mode, k=k)
    for step in range(8):
        rt.take_groups(P, step, timeout_s=60)
        rt.push_weights({}, step + 1)
    assert len(engine.submissions) >= 8 * P
    over = [(n, v) for n, v in engine.submissions if n > admission_limit(mode, k, P, v)]
    assert not over, f"(submitted, engine version) over the admission limit: {over[:5]}"


@pytest.mark.parametrize("mode,k,bound", [("pipeline", 0, 0), ("pipeline", 1, 1), ("pipeline", 3, 3),
                                          ("ppo-offpolicy", 2, 1)])
def test_every_taken_group_has_lag_at_most_k(make_runtime, mode, k, bound):
    """Long-tailed finishing (stragglers) forces the take rule to wait; no taken token is older than k
    (PPO-off-policy-k: k - 1, by construction, `scalerl.trainer.rollout.lag_rules`)."""
    engine = FakeEngine(ticks=long_tailed_ticks(seed=k))
    rt = make_runtime(engine, mode=mode, k=k)
    lags, taken = [], []
    for step in range(10):
        batch = rt.take_groups(P, step, timeout_s=60)
        assert len(batch) == P
        taken += [g.group_id for g in batch]
        lags += [step - min(v for s in g.samples for v in s.policy_versions) for g in batch]
        lags += [step - g.submitted_version for g in batch]
        rt.push_weights({}, step + 1)
    assert len(set(taken)) == len(taken), "a group was taken twice"
    assert max(lags) <= bound, f"lag {max(lags)} > {bound}"


def test_a_scorer_exception_surfaces_in_the_next_take_groups(make_runtime):
    worker = FakeWorker()
    boom = ValueError("verifier exploded")
    worker.fail_with = boom
    rt = make_runtime(FakeEngine(), worker)
    with pytest.raises(RuntimeError, match="generation side failed") as info:
        rt.take_groups(P, 0, timeout_s=30)
    assert info.value.__cause__ is boom


def test_an_engine_exception_surfaces_in_the_next_take_groups(make_runtime):
    engine = FakeEngine()
    engine.hold.set()
    rt = make_runtime(engine)
    boom = OSError("device lost")
    engine.fail_with = boom
    with pytest.raises(RuntimeError, match="generation side failed") as info:
        rt.take_groups(P, 0, timeout_s=30)
    assert info.value.__cause__ is boom


def test_a_failure_is_raised_even_when_a_batch_is_ready(make_runtime):
    worker = FakeWorker()
    rt = make_runtime(FakeEngine(), worker)
    rt.take_groups(P, 0, timeout_s=30)  # healthy: a first batch
    assert wait_until(lambda: rt.stats().finished_groups >= 2 * P + 1)  # more than a batch is scored
    boom = RuntimeError("late failure")
    worker.fail_with = boom
    rt.push_weights({}, 1)  # opens admission: the next group scored fails
    assert wait_until(lambda: rt._error is not None)
    with pytest.raises(RuntimeError) as info:
        rt.take_groups(P, 1, timeout_s=30)
    assert info.value.__cause__ is boom


@pytest.mark.parametrize("state", ["idle", "generating", "failed"])
def test_close_stops_every_thread(state):
    before = set(threading.enumerate())
    engine, worker = FakeEngine(ticks=long_tailed_ticks(seed=3)), FakeWorker()
    rt = LocalRuntime(engine, worker, mode="pipeline", k=2, prompts_per_step=P)
    rt.start(0)
    started = set(threading.enumerate()) - before
    assert {t.name for t in started} >= {"runtime-feeder", "runtime-scorer"}
    if state == "generating":
        rt.take_groups(P, 0, timeout_s=30)
    elif state == "failed":
        worker.fail_with = ValueError("x")
        assert wait_until(lambda: rt._error is not None)
    rt.close()
    alive = [t.name for t in started if t.is_alive()]
    assert alive == [], f"threads still alive after close(): {alive}"
    assert engine.closed == 1


def test_close_is_idempotent():
    engine = FakeEngine()
    rt = LocalRuntime(engine, FakeWorker(), mode="pipeline", k=1, prompts_per_step=P)
    rt.start(0)
    rt.close()
    rt.close()
    assert not any(t.name.startswith("runtime-") and t.is_alive() for t in rt._threads)


def test_stats_reflect_the_engine_stats(make_runtime):
    engine = FakeEngine()
    engine.hold.set()
    rt = make_runtime(engine)
    engine._stats = EngineStats(busy_s=2.5, idle_s=0.5, sampled_tokens=1234, weight_updates=0)
    stats = rt.stats()
    assert (stats.busy_s, stats.idle_s, stats.sampled_tokens) == (2.5, 0.5, 1234)
    assert stats.idle_fraction == pytest.approx(0.5 / 3.0)
    engine._stats.sampled_tokens = 2000  # later reads follow the engine
    assert rt.stats().sampled_tokens == 2000


def test_stats_count_submitted_finished_and_taken_groups(make_runtime):
    engine = FakeEngine()
    rt = make_runtime(engine, k=1)
    rt.take_groups(P, 0, timeout_s=30)
    limit = admission_limit("pipeline", 1, P, 0)
    assert wait_until(lambda: rt.stats().finished_groups == limit)
    stats = rt.stats()
    assert (stats.submitted_groups, stats.finished_groups, stats.taken_groups) == (limit, limit, P)
    assert stats.submitted_groups == engine.submitted()
