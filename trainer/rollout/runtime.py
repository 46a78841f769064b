"""The in-process runtime: a feeder thread, the engine's own decode thread, and a scorer thread.

feeder: while admission allows (`scalerl.trainer.rollout.lag_rules.admission_limit`), draw problems from the rollout
worker, submit requests to the engine; hand finished engine groups to the scorer queue.
scorer: decode + verify each finished group (the verifier pool runs its own processes, so scoring
overlaps with generation and training) and file it as scored.
trainer (the caller's thread): `take_groups` blocks under the lag rule; `push_weights` updates the
engine in flight and opens admission for the new version; `side_channel()` lets validation use the
same engine (`scalerl.trainer.rollout.side_channel`: its groups bypass the scorer).

Guarantees: the PipelineRL-k / PPO-off-policy-k rules of `scalerl.trainer.rollout.lag_rules`; an exception in any
thread is re-raised in the caller's next `take_groups`; `close()` stops all threads.
Non-guarantees: fairness between domains within a batch (the sampler mixes, finishing order decides).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Protocol

from scalerl.trainer.engines.base import GeneratedGroup, GenerationEngine, GenerationRequest
from scalerl.trainer.rollout.lag_rules import admission_limit, choose_groups, must_take_version
from scalerl.trainer.rollout.messages import GeneratorStats, RolloutGroup, WeightsPushed
from scalerl.trainer.rollout.side_channel import SideChannel

log = logging.getLogger(__name__)


class Runtime(ABC):
    """What the training loop needs from the generation side (see the module docstring)."""

    @abstractmethod
    def start(self, policy_version: int) -> None:
        """Start generating with the weights of `policy_version` already loaded in the engine."""

    @abstractmethod
    def take_groups(self, n: int, trainer_version: int, timeout_s: float) -> list[RolloutGroup]:
        """Block until the lag rule allows a batch of `n` scored groups; return it."""

    @abstractmethod
    def push_weights(self, weights: Mapping[str, Any], policy_version: int) -> WeightsPushed:
        """Apply new weights in flight on every generator; admission then opens for the new version."""

    @abstractmethod
    def take_extra_groups(self, n: int, timeout_s: float) -> list[RolloutGroup]:
        """The `n` oldest scored groups beyond the step's share (a curriculum refill), without the lag wait."""

    @abstractmethod
    def credit_admission(self, n: int) -> None:
        """Let generation submit `n` more groups than the admission rule counts (they replace refill takes)."""

    @abstractmethod
    def next_group_id(self) -> int:
        """The id the next submitted group gets (checkpointed, so a resumed run never reuses one)."""

    @abstractmethod
    def stats(self) -> GeneratorStats: ...

    @abstractmethod
    def close(self) -> None:
        """Stop every thread/actor; idempotent."""


class RolloutWorker(Protocol):
    """The generation-side work that is not the engine (implemented by `scalerl.trainer.rollout.worker.Rollouts`)."""

    def make_request(self, group_id: int) -> GenerationRequest: ...

    def score(self, generated: GeneratedGroup, submitted_version: int, submitted_at: float) -> RolloutGroup: ...


class LocalRuntime(Runtime):
    def __init__(self, engine: GenerationEngine, worker: RolloutWorker, *, mode: str, k: int,
                 prompts_per_step: int, first_group_id: int = 0) -> None:
        self.engine, self.worker = engine, worker
        self.mode, self.k, self.p = mode, k, prompts_per_step
        self._cv = threading.Condition()
        self._pushed = 0
        self._next_id = first_group_id
        self._submitted = 0
        self._outstanding: dict[int, int] = {}  # group id -> submitted version, until taken
        self._meta: dict[str, tuple[int, int, float]] = {}  # request id -> (group id, version, time)
        self._scored: list[RolloutGroup] = []
        self._to_score: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._threads: list[threading.Thread] = []
        self._stats = GeneratorStats()
        self._t0 = time.monotonic()
        self._side: SideChannel | None = None

    # ----------------------------------------------------------------------------- interface
    def start(self, policy_version: int) -> None:
        self._pushed = policy_version
        # Admission counts groups cumulatively; a resumed run has consumed policy_version batches.
        self._submitted = policy_version * self.p
        self._t0 = time.monotonic()
        for name, fn in (("feeder", self._feed), ("scorer", self._score_loop)):
            t = threading.Thread(target=self._guard(fn), name=f"runtime-{name}", daemon=True)
            t.start()
            self._threads.append(t)

    def take_groups(self, n: int, trainer_version: int, timeout_s: float) -> list[RolloutGroup]:
        return self._take(n, must_take_version(self.mode, self.k, trainer_version), timeout_s)

    def take_extra_groups(self, n: int, timeout_s: float) -> list[RolloutGroup]:
        """The `n` oldest scored groups beyond the step's share (a curriculum refill). No lag wait: taking
        the oldest groups early only moves their deadlines' work forward, so none left behind misses its."""
        return self._take(n, None, timeout_s)

    def credit_admission(self, n: int) -> None:
        """Let the generator submit `n` more groups than the admission rule counts (they replace groups
        taken by `take_extra_groups`; the outstanding count, hence the lag bound, is unchanged)."""
        with self._cv:
            self._submitted -= n
            self._cv.notify_all()

    def _take(self, n: int, must: int | None, timeout_s: float) -> list[RolloutGroup]:
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while True:
                if self._error is not None:
                    raise RuntimeError("the generation side failed") from self._error
                batch = choose_groups(self._scored, self._outstanding, n, must)
                if batch is not None:
                    taken = {g.group_id for g in batch}
                    self._scored = [g for g in self._scored if g.group_id not in taken]
                    for gid in taken:
                        self._outstanding.pop(gid, None)
                    self._stats.taken_groups += len(batch)
                    return batch
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no batch of {n} scored groups within {timeout_s:.0f} s "
                                       f"({len(self._scored)} scored, {len(self._outstanding)} outstanding)")
                self._cv.wait(min(left, 1.0))

    def push_weights(self, weights: Mapping[str, Any], policy_version: int) -> WeightsPushed:
        t0 = time.perf_counter()
        self.engine.update_weights(weights, policy_version)
        with self._cv:
            self._pushed = policy_version
            self._cv.notify_all()
        return WeightsPushed(policy_version=policy_version, elapsed_s=time.perf_counter() - t0)

    def side_channel(self, max_slots: int) -> SideChannel:
        """The engine as a second client sees it (validation); one channel per runtime, made on first use."""
        with self._cv:
            if self._side is None:
                self._side = SideChannel(self.engine, max_slots, failure=lambda: self._error)
            self._side.max_slots = max_slots
            return self._side

    def next_group_id(self) -> int:
        with self._cv:
            return self._next_id

    def stats(self) -> GeneratorStats:
        es = self.engine.stats
        with self._cv:
            out = self._stats.model_copy()
        out.wall_s = time.monotonic() - self._t0
        out.busy_s, out.idle_s, out.sampled_tokens = es.busy_s, es.idle_s, es.sampled_tokens
        return out

    def close(self) -> None:
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
        self._to_score.put(None)
        for t in self._threads:
            t.join(timeout=30)
        self.engine.close()

    # ----------------------------------------------------------------------------- threads
    def _guard(self, fn):
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # re-raised in take_groups
                log.exception("runtime thread failed")
                with self._cv:
                    self._error = exc
                    self._cv.notify_all()
        return run

    def _feed(self) -> None:
        while not self._stop.is_set():
            self._admit()
            for generated in self.engine.poll(timeout_s=0.02):
                side = self._side
                if side is None or not side.claim(generated):
                    self._to_score.put(generated)

    def _admit(self) -> None:
        with self._cv:
            limit = admission_limit(self.mode, self.k, self.p, self._pushed)
            room = limit - self._submitted
            version = self.engine.policy_version
        for _ in range(max(room, 0)):
            gid = self._next_id
            request = self.worker.make_request(gid)
            with self._cv:
                self._meta[request.request_id] = (gid, version, time.time())
                self._outstanding[gid] = version
                self._submitted += 1
                self._next_id += 1
                self._stats.submitted_groups += 1
            self.engine.submit(request)

    def _score_loop(self) -> None:
        while True:
            generated = self._to_score.get()
            if generated is None or self._stop.is_set():
                return
            with self._cv:
                gid, version, submitted_at = self._meta.pop(generated.request.request_id)
            group = self.worker.score(generated, version, submitted_at)
            assert group.group_id == gid, "request ids must map back to their group"
            with self._cv:
                self._scored.append(group)
                self._stats.finished_groups += 1
                self._cv.notify_all()
