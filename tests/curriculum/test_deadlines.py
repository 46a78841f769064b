"""The query watchdog: an armed deadline interrupts once when it passes; a disarmed one never does."""

from __future__ import annotations

import threading
import time

from scalerl.curriculum.ledger.deadlines import Deadlines


def test_a_passed_deadline_interrupts_once_and_a_disarmed_one_never():
    deadlines = Deadlines()
    fired: list[str] = []
    done = threading.Event()
    kept = deadlines.arm(10.0, lambda: fired.append("late"))
    cancelled = deadlines.arm(0.05, lambda: fired.append("cancelled"))
    deadlines.disarm(cancelled)
    deadlines.arm(0.1, lambda: (fired.append("due"), done.set()))
    assert done.wait(5)
    time.sleep(0.1)
    assert fired == ["due"]
    deadlines.disarm(kept)
    deadlines.disarm(kept)  # disarming twice (or after it fired) is harmless


def test_deadlines_fire_in_order_whatever_order_they_were_armed_in():
    deadlines = Deadlines()
    fired: list[float] = []
    done = threading.Event()
    for timeout_s in (0.3, 0.1, 0.2):
        deadlines.arm(timeout_s, lambda t=timeout_s: (fired.append(t), len(fired) == 3 and done.set()))
    assert done.wait(5)
    assert fired == [0.1, 0.2, 0.3]
