"""Verifiers: score model completions (math, code) into `scalerl.env.contracts.records.Verdict`s.

Model output is hostile input: verifiers never raise on it; every failure has a status.

Public API: `verify_batch(items, *, config=None) -> list[Verdict]` (process-wide pool, created on first
use) and `VerifierPool(config)` (`verify_batch`, `averify_batch`, `ready`, `info`, `close`). Importing
this package starts nothing and does not import math-verify or sympy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["CodeConfig", "MathConfig", "VerifierConfig", "VerifierPool", "close_default_pools", "verify_batch"]

if TYPE_CHECKING:
    from scalerl.verifiers.batch import VerifierPool, close_default_pools, verify_batch
    from scalerl.verifiers.verifier_config import CodeConfig, MathConfig, VerifierConfig


def __getattr__(name: str) -> Any:
    # Lazy: `import scalerl.verifiers` (e.g. for its config models) must stay cheap; sympy loads on first use.
    if name in ("VerifierPool", "verify_batch", "close_default_pools"):
        from scalerl.verifiers import batch

        return getattr(batch, name)
    if name in ("VerifierConfig", "MathConfig", "CodeConfig"):
        from scalerl.verifiers import verifier_config

        return getattr(verifier_config, name)
    raise AttributeError(f"module 'verifiers' has no attribute {name!r}")
