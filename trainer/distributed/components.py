"""Where a run's ledger, verifier pool and generation engine live: in this process, or in Ray actors.

`make_components(ray, spec, out)` returns `LocalComponents` (the default: objects in the trainer's
process) or, with `ray.enabled`, `RayComponents`: the ledger (the single writing owner) and the verifier
pool as actors pinned to the trainer's node behind `ActorProxy` (same methods as the objects), and the
generators anywhere (`scalerl.trainer.distributed.generators.RemoteEngines`). `spec` is what building an
engine reads (`scalerl.trainer.engines.engine_config.EngineSpec`). `scalerl.trainer.run.setup` builds a run
through this one seam, so the training loop and the in-process runtime are identical in both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scalerl.curriculum.ledger.ledger_config import LedgerConfig
from scalerl.curriculum.ledger.retirement import RetirementConfig
from scalerl.trainer.distributed.placement_config import RayConfig
from scalerl.trainer.engines.base import GenerationEngine
from scalerl.trainer.engines.engine_config import EngineSpec
from scalerl.verifiers.verifier_config import VerifierConfig


class LocalComponents:
    def __init__(self, spec: EngineSpec, out: Path) -> None:
        self.spec, self.out = spec, out

    def ledger(self, path: Path, retirement: RetirementConfig, config: LedgerConfig | None = None) -> Any:
        from scalerl.curriculum.ledger.store import Ledger

        return Ledger(path, retirement=retirement, config=config)

    def verifier(self, verifier_cfg: VerifierConfig) -> Any:
        from scalerl.verifiers import VerifierPool

        return VerifierPool(verifier_cfg)

    def engine(self, model: Any, eos_token_id: int, *, device: str, policy_version: int,
               seed: int) -> GenerationEngine:
        from scalerl.trainer.engines.factory import build_engine

        return build_engine(self.spec, model, eos_token_id, device=device, policy_version=policy_version, seed=seed,
                            work_dir=self.out)


def make_components(ray: RayConfig, spec: EngineSpec, out: Path) -> LocalComponents | RayComponents:
    """Ray actors with `ray.enabled`, else objects in this process."""
    if ray.enabled:
        return RayComponents(ray, spec, out)
    return LocalComponents(spec, out)


def init_ray(rc: RayConfig) -> bool:
    """Join `rc.address`, or start a local cluster; returns True when this call started one."""
    import ray

    if ray.is_initialized():
        return False
    if rc.address:
        ray.init(address=rc.address, namespace=rc.namespace)
        return False
    ray.init(num_cpus=rc.local_num_cpus, include_dashboard=False, namespace=rc.namespace)
    return True


def _here() -> Any:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)


class ActorProxy:
    """Calls the actor's methods synchronously, so it stands in for the object the actor holds."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def __getattr__(self, name: str) -> Any:
        import ray

        method = getattr(self._handle, name)
        return lambda *args, **kwargs: ray.get(method.remote(*args, **kwargs))

    def close(self) -> None:
        import ray

        try:
            ray.get(self._handle.close.remote(), timeout=60)
        finally:
            ray.kill(self._handle)


class RayComponents:
    """`scalerl.trainer.distributed.components` for Ray: ledger and verifier actors on this node,
    generators anywhere."""

    def __init__(self, ray: RayConfig, spec: EngineSpec, out: Path) -> None:
        self.ray, self.spec, self.out = ray, spec, out

    def ledger(self, path: Path, retirement: RetirementConfig, config: LedgerConfig | None = None) -> ActorProxy:
        import ray
        from scalerl.curriculum.ledger.store import Ledger

        actor = ray.remote(Ledger).options(num_cpus=0, scheduling_strategy=_here())
        return ActorProxy(actor.remote(path, retirement=retirement, config=config))

    def verifier(self, verifier_cfg: VerifierConfig) -> ActorProxy:
        import ray
        from scalerl.verifiers import VerifierPool

        # Scoring (scorer thread) and validation (trainer thread) call it concurrently.
        actor = ray.remote(VerifierPool).options(num_cpus=0, max_concurrency=4, scheduling_strategy=_here())
        return ActorProxy(actor.remote(verifier_cfg))

    def engine(
        self, model: Any, eos_token_id: int, *, device: str, policy_version: int, seed: int
    ) -> GenerationEngine:
        from scalerl.trainer.distributed.generators import RemoteEngines

        return RemoteEngines(self.ray, self.spec, model, eos_token_id, policy_version=policy_version, seed=seed)
