"""The math workers' dispatcher: requests of one reference answer go to one worker; idle workers take from busy
ones only; nothing is lost on a kill or on close."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from scalerl.verifiers.math.dispatch import Dispatcher, home


@dataclass
class Request:
    home: int
    name: str = ""
    line: bytes = field(default=b"x" * 10)


def taker(dispatcher: Dispatcher, slot: int, out: list) -> threading.Thread:
    thread = threading.Thread(target=lambda: out.append((slot, dispatcher.take(slot))), daemon=True)
    thread.start()
    return thread


def wait_until(condition, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def test_home_is_stable_and_in_range() -> None:
    for workers in (1, 2, 3, 8):
        slots = {home(f"\\frac{{{i}}}{{7}}", workers) for i in range(200)}
        assert slots <= set(range(workers))
    assert len({home(str(i), 4) for i in range(200)}) == 4  # the answers spread over every worker


def test_a_slot_takes_its_own_queue_first_in_first_out_within_the_limits() -> None:
    dispatcher = Dispatcher(2, max_requests=3, max_bytes=25)
    for i in range(5):
        dispatcher.put(Request(0, f"a{i}"))
    dispatcher.put(Request(1, "b0"))
    assert [r.name for r in dispatcher.take(0)] == ["a0", "a1"]  # 3 allowed, but 3 lines of 10 bytes > 25
    assert [r.name for r in dispatcher.take(0)] == ["a2", "a3"]
    assert [r.name for r in dispatcher.take(1)] == ["b0"]
    assert dispatcher.queued() == 1


def test_an_idle_slot_takes_half_the_queue_of_a_busy_one() -> None:
    dispatcher = Dispatcher(2, max_requests=16, max_bytes=10_000)
    for i in range(10):
        dispatcher.put(Request(1, f"b{i}"))
    # slot 1's driver is not waiting in take: busy (running a dispatch or starting its worker)
    assert [r.name for r in dispatcher.take(0)] == ["b0", "b1", "b2", "b3", "b4"]
    assert [r.name for r in dispatcher.take(0)] == ["b5", "b6"]
    assert [r.name for r in dispatcher.take(0)] == ["b7"]


def test_an_idle_slot_leaves_a_waiting_owners_requests_to_it() -> None:
    for _ in range(20):  # both drivers wake on the put: the owner must get it every time
        assert takers_of_one_request() == [(1, [Request(1, "mine")]), (0, None)]


def takers_of_one_request() -> list:
    """Two drivers waiting, one request for slot 1, then close: what each `take` returned, in order."""
    dispatcher = Dispatcher(2, max_requests=16, max_bytes=10_000)
    out: list = []
    threads = [taker(dispatcher, 0, out), taker(dispatcher, 1, out)]
    wait_until(lambda: all(dispatcher._waiting))
    dispatcher.put(Request(1, "mine"))
    wait_until(lambda: out)
    dispatcher.close()
    for thread in threads:
        thread.join(timeout=5)
    return out


def test_a_blocked_slot_wakes_for_work_from_a_busy_slot() -> None:
    dispatcher = Dispatcher(2, max_requests=16, max_bytes=10_000)
    out: list = []
    thread = taker(dispatcher, 0, out)
    wait_until(lambda: dispatcher._waiting[0])
    dispatcher.put(Request(1, "b0"))
    thread.join(timeout=5)
    assert out == [(0, [Request(1, "b0")])]


def test_requests_put_back_after_a_kill_go_first_in_their_order() -> None:
    dispatcher = Dispatcher(2, max_requests=16, max_bytes=10_000)
    dispatcher.put(Request(0, "later"))
    dispatcher.put_back([Request(0, "x"), Request(1, "y"), Request(0, "z")])
    assert [r.name for r in dispatcher.take(0)] == ["x", "z", "later"]
    assert [r.name for r in dispatcher.take(1)] == ["y"]


def test_close_wakes_every_taker_and_drain_returns_what_is_left() -> None:
    dispatcher = Dispatcher(3, max_requests=16, max_bytes=10_000)
    out: list = []
    threads = [taker(dispatcher, slot, out) for slot in range(2)]
    wait_until(lambda: dispatcher._waiting[0] and dispatcher._waiting[1])
    dispatcher.close()
    for thread in threads:
        thread.join(timeout=5)
    assert sorted(out) == [(0, None), (1, None)]
    dispatcher.put(Request(2, "late"))
    assert dispatcher.take(2) is None
    assert [r.name for r in dispatcher.drain()] == ["late"]
    assert dispatcher.queued() == 0
