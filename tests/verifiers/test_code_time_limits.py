"""Time limits per test case, as judges set them, with the whole run's budget (time_s × cases) as the outer
bound: a slow case cannot borrow the time of fast ones, and the verdict names the case that ran out."""

from __future__ import annotations

import pytest
from scalerl.env.contracts.records import Status, VerifyItem
from scalerl.verifiers.code.judge import CodeVerifier
from scalerl.verifiers.verifier_config import CodeConfig

# Case n burns n × 0.7 s of CPU: case 0 is instant, case 1 takes 0.7 s, case 2 takes 1.4 s.
BURN = ("import time\ndef solve(n):\n    t0 = time.process_time()\n"
        "    while time.process_time() - t0 < n * 0.7:\n        pass\n    return n\n")
SLEEP = "import time\ndef solve(n):\n    time.sleep(n)\n    return n\n"


@pytest.fixture(scope="module")
def verifier():
    with CodeVerifier() as v:
        yield v


def functional(code: str, args: list[float], time_s: float) -> VerifyItem:
    tests = {"kind": "functional", "entry_point": "solve",
             "cases": [{"args": [a], "expected": a} for a in args]}
    return VerifyItem(id="t", domain="code", completion=code, tests=tests, limits={"time_s": time_s})


def test_a_slow_case_fails_on_its_own_cpu_limit_though_the_total_fits(verifier: CodeVerifier) -> None:
    fits = verifier.verify_many([functional(BURN, [0, 1], time_s=1.0)])[0]
    assert fits.status is Status.correct, fits.details
    # 0 + 1.4 s of CPU fits the run's 2 × 1 s, but case 1 alone is over its 1 s.
    slow = verifier.verify_many([functional(BURN, [0, 2], time_s=1.0)])[0]
    assert slow.status is Status.timeout, slow.details
    assert slow.details["timeout_case"] == 1
    outcomes = [t["outcome"] for t in slow.details["tests"]]
    assert outcomes == ["passed", "timeout"]
    assert slow.details["tests"][0]["cpu_s"] < 0.5  # each case reports its own time


def test_a_slow_case_fails_on_its_own_wall_limit(verifier: CodeVerifier) -> None:
    # time_s 0.5, wall_factor 3: each case has 2.5 s of wall time; the run 4 s. Case 1 sleeps 3 s.
    slept = verifier.verify_many([functional(SLEEP, [0, 3], time_s=0.5)])[0]
    assert slept.status is Status.timeout and slept.details["timeout_case"] == 1, slept.details
    assert slept.details["tests"][1]["wall_s"] < 4.0


def test_later_cases_are_not_run_and_the_run_budget_stays_the_outer_bound() -> None:
    with CodeVerifier(CodeConfig(stop_at_first_failure=False)) as v:
        slow = v.verify_many([functional(BURN, [0, 2, 0], time_s=1.0)])[0]
        assert [t["outcome"] for t in slow.details["tests"]] == ["passed", "timeout", "not_run"]
        assert v.info()["kills"]["cpu"] == 1
        # Time spent outside every case (the program's top level) counts against the run's budget only.
        top_level = ("import time\nt0 = time.process_time()\nwhile time.process_time() - t0 < 5:\n    pass\n"
                     "def solve(n):\n    return n\n")
        over = v.verify_many([functional(top_level, [0, 0], time_s=1.0)])[0]
        assert over.status is Status.timeout and over.details["timeout_case"] == 0, over.details
        assert [t["outcome"] for t in over.details["tests"]] == ["timeout", "not_run"]


def test_stdio_cases_each_have_their_own_limit_and_the_verdict_names_the_case(verifier: CodeVerifier) -> None:
    code = BURN + "print(solve(int(input())))"
    tests = {"kind": "stdio", "cases": [{"input": "0", "output": "0"}, {"input": "2", "output": "2"}]}
    verdict = verifier.verify_many([VerifyItem(id="s", domain="code", completion=code, tests=tests,
                                               limits={"time_s": 1.0})])[0]
    assert verdict.status is Status.timeout and verdict.details["timeout_case"] == 1, verdict.details


def test_a_program_that_disarms_its_case_timers_still_meets_the_run_budget(verifier: CodeVerifier) -> None:
    dodge = ("import signal, time\ndef solve(n):\n    signal.setitimer(signal.ITIMER_PROF, 0)\n"
             "    signal.setitimer(signal.ITIMER_REAL, 0)\n    t0 = time.process_time()\n"
             "    while time.process_time() - t0 < n:\n        pass\n    return n\n")
    verdict = verifier.verify_many([functional(dodge, [0, 6], time_s=1.0)])[0]
    assert verdict.status is Status.timeout and verdict.details["timeout_case"] == 1, verdict.details
    assert verdict.details["tests"][1]["cpu_s"] < 6
