"""Generator actors and `RemoteEngines`, the `GenerationEngine` that fans requests out to them.

- `GeneratorActor` × `ray.num_generators` (one per engine, torch or vLLM; `ray.generator_*`
  resources). The trainer reaches them through `RemoteEngines`: requests go to the least-loaded
  generator, weights are `ray.put` once per push and applied in flight on every generator (the same
  pause → reload → resume of each engine).

Fault tolerance: a generator actor that dies is restarted by Ray (`ray.max_generator_restarts`).
The restarted actor holds every request until the latest weights arrive (it knows it was restarted:
`was_current_actor_reconstructed`), so no token is sampled by stale weights; `RemoteEngines` then
resends the weights and every request that was pending on it (duplicates are dropped by id). Groups
already generated there and not yet polled are regenerated. Not covered: the trainer, ledger or
verifier actor dying (the run stops with the error; resume from the last checkpoint with `--resume`).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from scalerl.trainer.distributed.placement_config import RayConfig
from scalerl.trainer.engines.base import EngineStats, GeneratedGroup, GenerationEngine, GenerationRequest
from scalerl.trainer.engines.engine_config import EngineSpec

log = logging.getLogger(__name__)


def _build_model(spec: EngineSpec) -> Any:
    """The policy architecture with random weights (the real ones arrive as a state dict)."""
    if spec.model is None:
        from scalerl.trainer.tiny.model import build_tiny_model

        return build_tiny_model(spec.tiny)
    from transformers import AutoConfig, AutoModelForCausalLM

    return AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(spec.model))


class GeneratorActor:
    """One generation engine (torch or vLLM) on its node. Wrapped by `ray.remote` in `RemoteEngines`."""

    def __init__(
        self, spec: EngineSpec, weights: Mapping[str, Any], eos_token_id: int, policy_version: int, seed: int
    ) -> None:
        import ray
        import torch
        from scalerl.trainer.engines.device import resolve_device
        from scalerl.trainer.engines.factory import build_engine

        torch.set_num_threads(spec.torch_threads)
        model = _build_model(spec)
        if spec.pushes_adapters:  # the trainer's adapted model: base weights + adapters (engines.factory)
            from scalerl.trainer.core.lora import apply_lora

            apply_lora(model, spec.lora)
        model.load_state_dict(dict(weights))
        device = resolve_device(spec.engine.device)
        self._dir = tempfile.mkdtemp(prefix="scalerl-generator-")
        self.engine = build_engine(
            spec,
            model.to(device),
            eos_token_id,
            device=device,
            policy_version=policy_version,
            seed=seed,
            work_dir=self._dir,
        )
        self._seen: set[str] = set()
        # A restarted actor must not sample with its initial (stale) weights: hold requests until weights come.
        self._held: list[GenerationRequest] | None = (
            [] if ray.get_runtime_context().was_current_actor_reconstructed else None
        )
        self._lock = threading.Lock()

    def submit(self, request: GenerationRequest) -> None:
        with self._lock:
            if request.request_id in self._seen:
                return
            self._seen.add(request.request_id)
            if self._held is not None:
                self._held.append(request)
                return
        self.engine.submit(request)

    def poll(self, timeout_s: float) -> list[GeneratedGroup]:
        return self.engine.poll(timeout_s)

    def update_weights(self, weights: Mapping[str, Any], policy_version: int) -> int:
        if policy_version != self.engine.policy_version:
            self.engine.update_weights(weights, policy_version)
        with self._lock:
            held, self._held = self._held or [], None
        for request in held:
            self.engine.submit(request)
        return policy_version

    def stats(self) -> dict[str, float]:
        s = self.engine.stats
        return {"busy_s": s.busy_s, "idle_s": s.idle_s, "sampled_tokens": s.sampled_tokens}

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        self.engine.close()
        shutil.rmtree(self._dir, ignore_errors=True)


class _Stats:
    """Summed generator counters; a restarted actor's counters restart at 0, so earlier totals are kept."""

    def __init__(self, n: int) -> None:
        self.last = [{"busy_s": 0.0, "idle_s": 0.0, "sampled_tokens": 0} for _ in range(n)]
        self.base = [{"busy_s": 0.0, "idle_s": 0.0, "sampled_tokens": 0} for _ in range(n)]

    def update(self, i: int, now: dict[str, float]) -> None:
        if now["sampled_tokens"] < self.last[i]["sampled_tokens"]:
            self.base[i] = {k: self.base[i][k] + self.last[i][k] for k in now}
        self.last[i] = now

    def total(self) -> EngineStats:
        return EngineStats(**{key: sum(b[key] + x[key] for b, x in zip(self.base, self.last))
                              for key in ("busy_s", "idle_s", "sampled_tokens")})


class RemoteEngines(GenerationEngine):
    """The generator actors behind the `GenerationEngine` interface (see the module docstring)."""

    def __init__(self, rc: RayConfig, spec: EngineSpec, model: Any, eos_token_id: int, *, policy_version: int,
                 seed: int) -> None:
        import ray

        self._version = policy_version
        self._weights = ray.put(_cpu_weights(model.state_dict()))
        self._initial_weights = (
            self._weights
        )  # a restart re-runs __init__ with it: it must outlive the pushes
        opts = {
            "num_cpus": rc.generator_num_cpus,
            "num_gpus": rc.generator_num_gpus,
            "resources": rc.generator_resources or None,
            "max_restarts": rc.max_generator_restarts,
            "max_task_retries": 0,
            "max_concurrency": 4,
        }
        actor, run_id = ray.remote(GeneratorActor), uuid.uuid4().hex[:8]
        self.actors = [
            actor.options(name=f"generator-{i}-{run_id}", **opts).remote(
                spec, self._weights, eos_token_id, policy_version, seed + 7919 * i
            )
            for i in range(rc.num_generators)
        ]
        self._pending: list[dict[str, GenerationRequest]] = [{} for _ in self.actors]
        self._epoch = [0] * len(self.actors)  # bumped by each recovery, so one failure is recovered once
        self._polls: dict[Any, tuple[int, int]] = {}
        self._lock = threading.RLock()
        self._stats = _Stats(len(self.actors))
        self.restarts = 0
        ray.get(
            [a.pid.remote() for a in self.actors]
        )  # fail here, not in the first poll, if they cannot start

    @property
    def policy_version(self) -> int:
        return self._version

    @property
    def stats(self) -> EngineStats:
        import ray

        for i, a in enumerate(self.actors):
            try:
                self._stats.update(i, ray.get(a.stats.remote(), timeout=30))
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                pass  # a restarting generator keeps its last counters
        return self._stats.total()

    def num_pending(self) -> int:
        with self._lock:
            return sum(len(p) for p in self._pending)

    def submit(self, request: GenerationRequest) -> None:
        with self._lock:
            i = min(range(len(self.actors)), key=lambda j: len(self._pending[j]))
            self._pending[i][request.request_id] = request
        self.actors[i].submit.remote(request)  # a lost submit is resent by the recovery

    def poll(self, timeout_s: float = 0.0) -> list[GeneratedGroup]:
        import ray

        with self._lock:
            busy = {i for i, _ in self._polls.values()}
            for i, a in enumerate(self.actors):
                if i not in busy and self._pending[i]:
                    self._polls[a.poll.remote(0.2)] = (i, self._epoch[i])
            refs = list(self._polls)
        if not refs:
            time.sleep(timeout_s)
            return []
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        out: list[GeneratedGroup] = []
        for ref in ready:
            with self._lock:
                i, epoch = self._polls.pop(ref)
            try:
                groups = ray.get(ref)
            except ray.exceptions.RayActorError:
                self._recover(i, epoch)
                continue
            with self._lock:
                out += [g for g in groups if self._pending[i].pop(g.request.request_id, None) is not None]
        return out

    def update_weights(self, weights: Mapping[str, Any], policy_version: int) -> None:
        import ray

        ref = ray.put(_cpu_weights(weights))
        with self._lock:
            self._weights, self._version = ref, policy_version
            epochs = list(self._epoch)
        calls = [a.update_weights.remote(ref, policy_version) for a in self.actors]
        for i, call in enumerate(calls):
            try:
                ray.get(call)
            except ray.exceptions.RayActorError:
                self._recover(i, epochs[i])

    def _recover(self, i: int, epoch: int) -> None:
        """Generator i died: wait for Ray's restart, send the latest weights, resend its pending requests."""
        import ray

        with self._lock:
            if self._epoch[i] != epoch:
                return  # another thread already recovered this failure
            self._epoch[i] += 1
            self.restarts += 1
            log.warning("generator %d died; waiting for its restart (restart %d)", i, self.restarts)
            deadline = time.monotonic() + 300
            while True:
                try:  # calls queue while Ray restarts the actor; they fail only once restarts are exhausted
                    ray.get(self.actors[i].update_weights.remote(self._weights, self._version), timeout=60)
                    break
                except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as exc:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"generator {i} did not come back within 300 s") from exc
                    time.sleep(1.0)
            for request in self._pending[i].values():
                self.actors[i].submit.remote(request)
            log.warning(
                "generator %d is back with version %d; %d requests resent",
                i,
                self._version,
                len(self._pending[i]),
            )

    def close(self) -> None:
        import ray

        for a in self.actors:
            try:
                ray.get(a.close.remote(), timeout=60)
            except Exception:  # dead or stuck: kill it anyway
                log.warning("generator did not close cleanly", exc_info=True)
            ray.kill(a)


def _cpu_weights(weights: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v.detach().to("cpu") for k, v in weights.items()}

