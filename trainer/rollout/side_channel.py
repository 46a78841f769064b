"""A second client of the run's generation engine: validation's requests on the engine that trains.

`SideChannel` is a `GenerationEngine` view of the runtime's engine. `submit` sends the request to that
engine under a prefixed id (`validation/<id>`, so it never collides with a training group's `g<n>`);
the runtime's feeder, which polls the engine for everyone, hands every group whose id it holds to the
channel instead of the scorer (`LocalRuntime._feed` → `claim`), and `poll` returns them under their
original request. Why a view and not a second engine: vLLM reserves a fraction of the device
(`engine.vllm.gpu_memory_utilization`) when it starts, so where it shares a GPU with the trainer a
second instance has no room; on its own GPUs (Ray generators) the view adds nothing to any device.

Guarantees: groups of the channel never reach the scorer, the ledger or a training batch; the
runtime's admission of training groups is unchanged (validation's requests are not counted in it);
`poll` re-raises a failure of the runtime's threads. The policy version is the engine's: the caller
checks it (the training loop pushes no weights while it validates). Not guaranteed: how the engine
interleaves validation's sequences with training's (the engine's scheduler decides; its slots and
memory are the bound for both together); `update_weights` is refused (the runtime owns pushes).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from scalerl.trainer.engines.base import EngineStats, GeneratedGroup, GenerationEngine, GenerationRequest

PREFIX = "validation/"


class SideChannel(GenerationEngine):
    """See the module docstring. `failure()` returns the runtime's error, if any (raised by `poll`)."""

    def __init__(self, engine: GenerationEngine, max_slots: int,
                 failure: Callable[[], BaseException | None] = lambda: None) -> None:
        self.engine, self.max_slots, self._failure = engine, max_slots, failure
        self._lock = threading.Lock()
        self._requests: dict[str, GenerationRequest] = {}
        self._done: queue.Queue[GeneratedGroup] = queue.Queue()

    @property
    def stats(self) -> EngineStats:
        return self.engine.stats

    @property
    def policy_version(self) -> int:
        return self.engine.policy_version

    def submit(self, request: GenerationRequest) -> None:
        routed = request.model_copy(update={"request_id": PREFIX + request.request_id})
        with self._lock:
            if routed.request_id in self._requests:
                raise ValueError(f"request id {request.request_id!r} is already pending on the side channel")
            self._requests[routed.request_id] = request
        try:
            self.engine.submit(routed)
        except BaseException:
            with self._lock:
                self._requests.pop(routed.request_id, None)
            raise

    def claim(self, group: GeneratedGroup) -> bool:
        """Called by the runtime's feeder for every finished group: True (and kept here) when it is ours."""
        with self._lock:
            original = self._requests.pop(group.request.request_id, None)
        if original is None:
            return False
        self._done.put(group.model_copy(update={"request": original}))
        return True

    def poll(self, timeout_s: float = 0.0) -> list[GeneratedGroup]:
        deadline = time.monotonic() + timeout_s
        out: list[GeneratedGroup] = []
        while not out:
            err = self._failure()
            if err is not None:
                raise RuntimeError("the generation side failed during validation") from err
            left = deadline - time.monotonic()
            try:
                out.append(self._done.get(timeout=max(0.0, min(left, 0.2))))
            except queue.Empty:
                if left <= 0:
                    break
        while True:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                return out

    def num_pending(self) -> int:
        with self._lock:
            return len(self._requests) + self._done.qsize()

    def update_weights(self, weights: Mapping[str, Any], policy_version: int) -> None:
        raise RuntimeError("the side channel does not push weights: the runtime owns the engine's updates")

    def close(self) -> None:
        """Nothing to release: the engine belongs to the runtime (it stays up for training)."""
