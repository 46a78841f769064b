"""Which math worker runs which request: one queue per worker, filled by reference answer, with stealing.

A request goes to its home worker, `home(key, workers)`: the requests of one reference answer queue for
one worker, so that worker's parse memos (`scalerl.verifiers.math.worker`) parse a prompt's reference,
and the answers its samples repeat, once instead of once per worker. A driver takes from its own queue
first. An idle driver takes from another worker's queue only while that worker is busy (its driver is
not waiting here: running a dispatch, or starting a worker), and then at most half of that queue, so
a batch's tail is shared between the workers and a lightly loaded pool keeps its affinity.

Guarantees: every request put in is taken by exactly one driver or returned by `drain()`; each queue
is first-in first-out, and requests put back (`put_back`, after a killed worker) go to the front of their
home queue; `take` blocks until there is work the slot may take, and returns None once the dispatcher
is closed. Not guaranteed: affinity (a busy home worker's requests may run elsewhere); order across queues.
"""

from __future__ import annotations

import threading
import zlib
from collections import deque
from collections.abc import Iterable
from typing import Protocol


class Queued(Protocol):
    home: int  # the worker slot chosen by `home`
    line: bytes  # the request as written to the worker's pipe


def home(key: str, workers: int) -> int:
    """The worker slot (of `workers` >= 1) for requests keyed by `key`, a reference answer."""
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % workers


class Dispatcher:
    """Per-worker FIFO queues with stealing from busy workers (module docstring)."""

    def __init__(self, workers: int, max_requests: int, max_bytes: int):
        self._queues: list[deque[Queued]] = [deque() for _ in range(workers)]
        self._waiting = [False] * workers  # the slot's driver is blocked in `take`
        self._max_requests, self._max_bytes = max_requests, max_bytes
        self._changed = threading.Condition()
        self._closed = False

    def put(self, request: Queued) -> None:
        with self._changed:
            self._queues[request.home].append(request)
            self._changed.notify_all()

    def put_back(self, requests: Iterable[Queued]) -> None:
        """Requests that never ran, in their order, ahead of everything queued for their home workers."""
        with self._changed:
            for request in reversed(list(requests)):
                self._queues[request.home].appendleft(request)
            self._changed.notify_all()

    def take(self, slot: int) -> list[Queued] | None:
        """The next requests for `slot`'s worker, at most `max_requests` and `max_bytes` of lines; None once
        closed. Blocks while there is nothing this slot may take."""
        with self._changed:
            self._waiting[slot] = True
            try:
                while not self._closed:
                    source, limit = self._source(slot)
                    if source is not None:
                        return self._pop(source, limit)
                    self._changed.wait()
                return None
            finally:
                self._waiting[slot] = False

    def _source(self, slot: int) -> tuple[deque | None, int]:
        own = self._queues[slot]
        if own:
            return own, self._max_requests
        busy = [q for other, q in enumerate(self._queues) if q and not self._waiting[other]]
        if not busy:
            return None, 0
        victim = max(busy, key=len)
        return victim, max(1, min(self._max_requests, len(victim) // 2))

    def _pop(self, source: deque, limit: int) -> list[Queued]:
        batch = [source.popleft()]
        size = len(batch[0].line)
        while source and len(batch) < limit and size + len(source[0].line) <= self._max_bytes:
            size += len(source[0].line)
            batch.append(source.popleft())
        return batch

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def drain(self) -> list[Queued]:
        """Everything still queued, removed (for failing it after `close`)."""
        with self._changed:
            left = [request for q in self._queues for request in q]
            for q in self._queues:
                q.clear()
            return left

    def queued(self) -> int:
        with self._changed:
            return sum(len(q) for q in self._queues)
