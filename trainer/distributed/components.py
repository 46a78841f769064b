"""Where a run's ledger, verifier pool and generation engine live: in this process, or in Ray actors.

`make_components(cfg, out)` returns `LocalComponents` (the default: objects in the trainer's process)
or, with `ray.enabled`, `trainer.ray_runtime.RayComponents` (the same objects as Ray actors behind
proxies with the same methods). `trainer.run_setup` builds a run through this one seam, so the
training loop and `LocalRuntime` (feeder + scorer threads) are identical in both cases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class LocalComponents:
    def __init__(self, cfg: Any, out: Path) -> None:
        self.cfg, self.out = cfg, out

    def ledger(self, path: Path, retirement: Any) -> Any:
        from curriculum.ledger import Ledger

        return Ledger(path, retirement=retirement)

    def verifier(self, verifier_cfg: Any) -> Any:
        from verifiers import VerifierPool

        return VerifierPool(verifier_cfg)

    def engine(self, model: Any, eos_token_id: int, *, device: str, policy_version: int, seed: int) -> Any:
        from trainer.engines.factory import build_engine

        return build_engine(
            self.cfg,
            model,
            eos_token_id,
            device=device,
            policy_version=policy_version,
            seed=seed,
            work_dir=self.out,
        )


def make_components(cfg: Any, out: Path) -> Any:
    if cfg.ray.enabled:
        from trainer.ray_runtime import RayComponents

        return RayComponents(cfg, out)
    return LocalComponents(cfg, out)
