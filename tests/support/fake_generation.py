"""Fakes for the two sides of `scalerl.trainer.rollout.runtime.LocalRuntime`: a generation engine and a rollout worker.

`FakeEngine` implements `scalerl.trainer.engines.base.GenerationEngine`. Each request finishes after a seeded
number of `poll` calls (one "tick" per call, long-tailed so stragglers exist); every token records the
engine's version when the request was submitted (first token) and when it finished (second token), so
a group's lag is measured as the engine would report it. It logs every submission with the engine's
version at that moment, can hold all requests (nothing finishes) and can fail in `poll`.

`FakeWorker` implements `scalerl.trainer.rollout.runtime.RolloutWorker` without a sampler, codec or verifier;
it can fail in `score`.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from scalerl.env.contracts.records import ChatMessage, ProblemRecord, Verdict
from scalerl.trainer.engines.base import (
    EngineStats,
    GeneratedGroup,
    GeneratedSample,
    GenerationEngine,
    GenerationRequest,
)
from scalerl.trainer.rollout.messages import RolloutGroup

PROBLEM = ProblemRecord(prompt_id="fake-1", domain="math", source="fake",
                        prompt=[ChatMessage(role="user", content="1+1=")], answer="2")


def long_tailed_ticks(seed: int) -> Callable[[int], int]:
    """Polls until a request finishes: mostly 1-3, one in six a straggler of 15-40."""
    rng = random.Random(seed)
    lock = threading.Lock()

    def ticks(_: int) -> int:
        with lock:
            return rng.randint(15, 40) if rng.random() < 1 / 6 else rng.randint(1, 3)

    return ticks


class FakeEngine(GenerationEngine):
    def __init__(self, *, ticks: Callable[[int], int] | None = None, tick_s: float = 0.004) -> None:
        self._stats = EngineStats()
        self._lock = threading.Lock()
        self._version = 0
        self._ticks = ticks or (lambda _: 1)
        self._tick_s = tick_s
        self._running: dict[str, list[Any]] = {}  # request id -> [request, ticks left, version at submit]
        self._n = 0
        self.submissions: list[tuple[int, int]] = []  # (submitted so far, engine version at that submit)
        self.hold = threading.Event()  # set: nothing finishes
        self.fail_with: BaseException | None = None  # raised by the next poll
        self.closed = 0

    @property
    def policy_version(self) -> int:
        with self._lock:
            return self._version

    def submit(self, request: GenerationRequest) -> None:
        with self._lock:
            self._running[request.request_id] = [request, self._ticks(self._n), self._version]
            self._n += 1
            self.submissions.append((self._n, self._version))

    def poll(self, timeout_s: float = 0.0) -> list[GeneratedGroup]:
        time.sleep(min(timeout_s, self._tick_s))
        if self.fail_with is not None:
            raise self.fail_with
        out = []
        with self._lock:
            if self.hold.is_set():
                return []
            for rid in list(self._running):
                entry = self._running[rid]
                entry[1] -= 1
                if entry[1] <= 0:
                    request, _, submitted = self._running.pop(rid)
                    samples = [GeneratedSample(sample_index=i, token_ids=[7, 8], logprobs=[-1.0, -1.0],
                                               policy_versions=[submitted, self._version], loss_mask=[1, 1],
                                               finish_reason="stop")
                               for i in range(request.samples_per_prompt)]
                    out.append(GeneratedGroup(request=request, samples=samples))
        return out

    def update_weights(self, weights: Mapping[str, Any], policy_version: int) -> None:
        with self._lock:
            self._version = policy_version
            self._stats.weight_updates += 1

    def num_pending(self) -> int:
        with self._lock:
            return len(self._running)

    def submitted(self) -> int:
        with self._lock:
            return self._n

    def close(self) -> None:
        self.closed += 1


class FakeWorker:
    """Requests of 2 samples; scoring marks sample 0 correct, sample 1 wrong."""

    def __init__(self) -> None:
        self.fail_with: BaseException | None = None  # raised by the next score

    def make_request(self, group_id: int) -> GenerationRequest:
        return GenerationRequest(request_id=f"g{group_id}", prompt_token_ids=[1, 2], samples_per_prompt=2)

    def score(self, generated: GeneratedGroup, submitted_version: int, submitted_at: float) -> RolloutGroup:
        if self.fail_with is not None:
            raise self.fail_with
        n = len(generated.samples)
        return RolloutGroup(
            group_id=int(generated.request.request_id[1:]), problem=PROBLEM, prompt_token_ids=[1, 2],
            samples=generated.samples, completions=["x"] * n,
            verdicts=[Verdict.of("correct" if i == 0 else "wrong") for i in range(n)],
            submitted_version=submitted_version, submitted_at=submitted_at, finished_at=time.time())


def wait_until(condition: Callable[[], bool], timeout_s: float = 20.0, every_s: float = 0.01) -> bool:
    """Poll `condition` until it holds (True) or `timeout_s` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every_s)
    return condition()
