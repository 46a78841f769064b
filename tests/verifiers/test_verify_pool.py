"""VerifierPool / verify_batch: order, dedupe, hostile inputs, deadlines, kills, threads, asyncio."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from scalerl import verifiers
from scalerl.verifiers import VerifierPool
from scalerl.verifiers.verifier_config import MathConfig, VerifierConfig

TIMEOUT_S = 3.0  # generous: a cold sympy parse on a loaded 2-core host can take over 1 s
TOWER = "10^{10^{10^{10}}}"


def m(i, completion, answer="3"):
    return {"id": str(i), "domain": "math", "completion": completion, "answer": answer}


def wait_ready(pool, limit_s=120.0):
    start = time.monotonic()
    while not pool.ready():
        assert time.monotonic() - start < limit_s, pool.info()
        time.sleep(0.05)


@pytest.fixture(scope="module")
def pool():
    with VerifierPool(VerifierConfig(math=MathConfig(timeout_s=TIMEOUT_S))) as p:
        wait_ready(p)
        yield p


MIXED = [
    m("a", "so \\boxed{3}"), m("b", "so \\boxed{4}"), m("c", "x^2 gives \\boxed{(x+1)^2}", "x^2+2x+1"),
    m("d", "nothing here"), m("e", "\\boxed{" + "1" * 5000 + "}"), m("f", "<think>\\boxed{3}"),
    m("g", "\\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{1}{\\sqrt{2}}"), m("h", "\\boxed{x+1}", "x+2"),
]
EXPECTED = ["correct", "wrong", "correct", "no_answer", "unparsable", "no_answer", "correct", "wrong"]


def test_order_and_ids_are_kept(pool):
    verdicts = pool.verify_batch(MIXED)
    assert [v.id for v in verdicts] == [it["id"] for it in MIXED]
    assert [v.status.value for v in verdicts] == EXPECTED
    assert [v.reward for v in verdicts] == [1.0 if s == "correct" else 0.0 for s in EXPECTED]


def test_identical_pairs_are_scored_once(pool):
    before = pool.info()["math"]["requests"]
    verdicts = pool.verify_batch([m(i, "so \\boxed{2x+2}", "2(x+1)") for i in range(16)])
    assert pool.info()["math"]["requests"] - before == 1
    assert {v.status.value for v in verdicts} == {"correct"}
    assert sum(bool(v.details.get("deduplicated")) for v in verdicts) == 15


def test_empty_and_megabyte_completions(pool):
    start = time.perf_counter()
    verdicts = pool.verify_batch([m(0, ""), m(1, "x" * 1_000_000 + "\\boxed{3}"), m(2, "y" * 1_000_000),
                                  m(3, "\\boxed{" + "(" * 999_000)])
    assert [v.status.value for v in verdicts] == ["no_answer", "correct", "no_answer", "unparsable"]
    assert time.perf_counter() - start < 10


def test_power_tower_stops_inside_the_deadline_and_pool_keeps_serving(pool):
    towers = [m(i, f"\\boxed{{{t}}}") for i, t in enumerate([TOWER, "9^{9^{9^{9}}}", "2^{3^{4^{5^{6}}}}"])]
    verdicts = pool.verify_batch(towers)
    assert {v.status.value for v in verdicts} <= {"timeout", "unparsable", "wrong"}
    assert all(v.elapsed_s <= TIMEOUT_S + 1.0 for v in verdicts)  # + scheduling slack on a loaded host
    assert verdicts[0].status.value in ("timeout", "unparsable")
    assert [v.status.value for v in pool.verify_batch(MIXED)] == EXPECTED


def test_threads_get_the_same_verdicts_as_one_thread(pool):
    items = [m(i, f"so \\boxed{{{x}}}", "x^2-1") for i, x in
             enumerate(["(x-1)(x+1)", "x^2+1", "x^2-1", "1-x^2", "(x+1)(x-1)", "x*x-1"] * 3)]
    items += MIXED
    expected = [v.status.value for v in pool.verify_batch(items)]
    results: list[list[str]] = []

    def run():
        results.append([v.status.value for v in pool.verify_batch(items)])

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(results) == 8 and all(r == expected for r in results)


def test_asyncio_callers_share_the_pool(pool):
    async def main():
        return await asyncio.gather(pool.averify_batch(MIXED), pool.averify_batch(MIXED[::-1]))

    first, second = asyncio.run(main())
    assert [v.status.value for v in first] == EXPECTED
    assert [v.status.value for v in second] == EXPECTED[::-1]


def test_malformed_item_names_index_and_field(pool):
    with pytest.raises(ValueError, match=r"item 1: answer|item 1: .*answer"):
        pool.verify_batch([m(0, "x"), {"id": "1", "domain": "math", "completion": "x"}])
    with pytest.raises(ValueError, match="item 0: colour"):
        pool.verify_batch([{**m(0, "x"), "colour": "red"}])


def test_info_reports_workers_and_kill_counters(pool):
    info = pool.info()
    assert info["ready"] and info["math"]["alive"] == 2 and len(info["math"]["pids"]) == 2
    assert set(info["math"]["kills"]) == {"timeout", "crash"}


def test_hard_deadline_kills_and_replaces_the_worker():
    cfg = VerifierConfig(math=MathConfig(workers=1, timeout_s=1.0, soft_timeout_fraction=None))
    with VerifierPool(cfg) as p:
        wait_ready(p)
        pid = p.info()["math"]["pids"][0]
        start = time.perf_counter()
        verdict = p.verify_batch([m(0, f"\\boxed{{{TOWER}}}")])[0]
        assert verdict.status.value == "timeout" and "killed" in verdict.details["reason"]
        assert time.perf_counter() - start < 3.0
        assert p.verify_batch([m(1, "\\boxed{(x-1)(x+1)}", "x^2-1")])[0].status.value == "correct"  # via sympy
        info = p.info()["math"]
        assert info["kills"] == {"timeout": 1, "crash": 0} and info["restarts"] == 1
        assert info["pids"] != [pid]


def test_items_queued_behind_a_killed_item_are_scored_by_the_replacement():
    """Requests go to a worker in batches; the ones after a hard-deadline kill were never started and
    must be scored by the next worker, not failed with the culprit."""
    cfg = VerifierConfig(math=MathConfig(workers=1, timeout_s=1.0, soft_timeout_fraction=None))
    with VerifierPool(cfg) as p:
        wait_ready(p)
        after = [m(k, f"\\boxed{{(x-{k})(x+{k})}}", f"x^2-{k * k}") for k in range(1, 4)]
        verdicts = p.verify_batch([m(0, f"\\boxed{{{TOWER}}}"), *after])
        assert [v.status.value for v in verdicts] == ["timeout", "correct", "correct", "correct"]
        assert p.info()["math"]["kills"] == {"timeout": 1, "crash": 0}


def test_crashed_worker_gives_error_and_is_replaced():
    cfg = VerifierConfig(math=MathConfig(workers=1, timeout_s=30.0, soft_timeout_fraction=None))
    with VerifierPool(cfg) as p:
        wait_ready(p)
        pid = p.info()["math"]["pids"][0]
        threading.Timer(1.0, os.kill, args=(pid, signal.SIGKILL)).start()
        verdict = p.verify_batch([m(0, f"\\boxed{{{TOWER}}}")])[0]
        assert verdict.status.value == "error" and "crashed" in verdict.details["reason"]
        assert p.verify_batch([m(1, "\\boxed{(x-1)(x+1)}", "x^2-1")])[0].status.value == "correct"  # via sympy
        assert p.info()["math"]["kills"] == {"timeout": 0, "crash": 1}


def test_close_is_idempotent_and_later_calls_get_errors():
    p = VerifierPool(VerifierConfig(math=MathConfig(workers=1)))
    pids = p.info()["math"]["pids"]
    p.close()
    p.close()
    assert not p.ready()
    assert p.verify_batch([m(0, "\\boxed{x}", "y")])[0].status.value == "error"
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_code_items_route_to_the_code_verifier(pool):
    code = {"id": "c", "domain": "code", "completion": "```python\nprint(sum(map(int, input().split())))\n```",
            "tests": {"kind": "stdio", "cases": [{"input": "1 2\n", "output": "3\n"}]}}
    verdicts = pool.verify_batch([m("m1", "\\boxed{3}"), code, m("m2", "\\boxed{x+1}", "1+x")])
    assert [v.id for v in verdicts] == ["m1", "c", "m2"]
    assert verdicts[0].status.value == verdicts[2].status.value == "correct"
    if importlib.util.find_spec("scalerl.verifiers.code.judge") is None:
        assert verdicts[1].status.value == "error" and "code verifier unavailable" in verdicts[1].details["reason"]
    else:
        assert verdicts[1].status.value == "correct", verdicts[1].details
        assert "sandbox" in pool.info()["code"] or "layers" in pool.info()["code"]


def test_reward_table_applies_to_every_domain():
    from scalerl.env.contracts.records import RewardTable

    cfg = VerifierConfig(math=MathConfig(workers=1), rewards=RewardTable(correct=2.0, wrong=-1.0))
    code = {"id": "c", "domain": "code", "completion": "```python\nprint(4)\n```",
            "tests": {"kind": "stdio", "cases": [{"input": "", "output": "3\n"}]}}
    with VerifierPool(cfg) as p:
        verdicts = p.verify_batch([m(0, "\\boxed{3}"), m(1, "\\boxed{x}", "y"), code])
    assert [v.reward for v in verdicts[:2]] == [2.0, -1.0]
    assert verdicts[2].status.value == "wrong" and verdicts[2].reward == -1.0


def test_importing_verifiers_starts_nothing():
    code = ("import sys, scalerl.verifiers.batch; assert not scalerl.verifiers.batch._DEFAULT_POOLS; "
            "assert 'sympy' not in sys.modules and 'math_verify' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_module_level_verify_batch_uses_one_default_pool():
    cfg = VerifierConfig(math=MathConfig(workers=1))
    try:
        first = verifiers.verify_batch([m(0, "\\boxed{3}")], config=cfg)
        second = verifiers.verify_batch([VerifierPool.__module__ and m(1, "\\boxed{2+1}")], config=cfg)
        assert first[0].status.value == second[0].status.value == "correct"
        from scalerl.verifiers.batch import _DEFAULT_POOLS

        assert len([k for k in _DEFAULT_POOLS if k == cfg.model_dump_json()]) == 1
    finally:
        verifiers.close_default_pools()


class _Broken:
    """A domain verifier that fails on submit or on collect (the other side of the pool's interface)."""

    def __init__(self, where: str):
        self.where = where

    def submit(self, items):
        if self.where == "submit":
            raise RuntimeError("submit broke")

        def collect():
            raise RuntimeError("collect broke")
        return collect

    def ready(self):
        return True

    def info(self):
        return {}

    def close(self):
        pass


@pytest.mark.parametrize("where", ["submit", "collect"])
def test_a_failing_domain_verifier_gives_errors_for_its_items_only(where):
    code = {"id": "c", "domain": "code", "completion": "x", "tests": {"kind": "stdio", "cases": [{"output": "1"}]}}
    with VerifierPool(VerifierConfig(math=MathConfig(workers=1))) as p:
        p._verifiers["code"] = _Broken(where)
        verdicts = p.verify_batch([m("m1", "\\boxed{3}"), code])
    assert verdicts[0].status.value == "correct"
    assert verdicts[1].status.value == "error" and f"{where} broke" in verdicts[1].details["reason"]
