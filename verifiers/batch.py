"""Batch API: `verify_batch(items) -> list[Verdict]` and the `VerifierPool` that serves it.

The pool holds one verifier per installed domain (`scalerl.env.contracts.domains`: each spec's
`verifier` factory, e.g. `scalerl.verifiers.math.verifier`, `scalerl.verifiers.code.verifier`), built
when the pool is. A batch is split by domain; every domain's share is submitted before any is
collected, so math's sympy work runs while code runs in the sandbox.

Guarantees: verdicts come back in input order with `Verdict.id = item.id`; a `VerifierPool` may be
used from many threads at once and from asyncio (`averify_batch` runs off the event loop); model
text never raises (malformed *items* do: `ValueError` naming the item index and field); a domain's
verifier that raises on a batch gives `error` verdicts for its items; `close()` is idempotent and
closes every verifier. Every verdict of a domain carries its verifier's `verifier_version` and
`settings_digest` in its details (`scalerl.verifiers.versions`). A sampled share of negative verdicts
carries a second opinion in its details (`scalerl.verifiers.second_opinion`; status and reward
unchanged). The module-level `verify_batch` uses one process-wide pool per distinct config, created on
first use (never at import) and closed at interpreter exit.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError
from scalerl.env.contracts.config_loader import validation_problems
from scalerl.env.contracts.domains import DomainVerifier, domains
from scalerl.env.contracts.records import Status, Verdict, VerifyItem
from scalerl.verifiers.second_opinion import review
from scalerl.verifiers.verifier_config import VerifierConfig
from scalerl.verifiers.versions import verdict_stamp

logger = logging.getLogger(__name__)


def as_items(items: Iterable[VerifyItem | dict[str, Any]]) -> list[VerifyItem]:
    """Validate dicts into `VerifyItem`s; the error names the item index and the field."""
    out = []
    for index, item in enumerate(items):
        if isinstance(item, VerifyItem):
            out.append(item)
            continue
        try:
            out.append(VerifyItem.model_validate(item))
        except ValidationError as exc:
            raise ValueError(f"item {index}: {validation_problems(exc, first_only=True)[0]}") from exc
    return out


class VerifierPool:
    """One verifier per installed domain; math workers start now and warm in the background."""

    def __init__(self, config: VerifierConfig | None = None):
        self.config = config or VerifierConfig()
        self._verifiers: dict[str, DomainVerifier] = {name: spec.verifier(self.config)
                                                      for name, spec in domains().items()}
        # verifier_version and settings_digest, stamped on every verdict of the domain (the ledger keeps them)
        self._stamps = {name: verdict_stamp(name, v, self.config) for name, v in self._verifiers.items()}
        self._lock = threading.Lock()
        self._closed = False

    def __enter__(self) -> VerifierPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def verify_batch(self, items: Iterable[VerifyItem | dict[str, Any]]) -> list[Verdict]:
        items = as_items(items)
        verdicts: list[Verdict | None] = [None] * len(items)
        by_domain: dict[str, list[int]] = {}
        for i, item in enumerate(items):
            by_domain.setdefault(item.domain, []).append(i)
        collectors = [(name, indices, self._submit(name, [items[i] for i in indices]))
                      for name, indices in by_domain.items()]
        for name, indices, collect in collectors:
            stamp = self._stamps[name]
            for i, verdict in zip(indices, self._collect(collect, len(indices))):
                # one copy carries both: a verifier may hand the same verdict object out twice (a memo)
                verdicts[i] = verdict.model_copy(update={"details": {**verdict.details, **stamp}, "id": items[i].id})
        return review(items, verdicts, self.config, self._verifiers)  # a sampled second opinion on negatives

    def _submit(self, name: str, items: list[VerifyItem]):
        try:
            return self._verifiers[name].submit(items)
        except Exception as exc:  # one domain's failure must not lose the others' verdicts
            logger.exception("the %s verifier failed on a batch of %d items", name, len(items))
            reason = f"{name} verifier failed: {type(exc).__name__}: {exc}"  # `exc` is unbound after the block
            return lambda: self._errors(len(items), reason)

    def _collect(self, collect, count: int) -> list[Verdict]:
        try:
            return collect()
        except Exception as exc:  # see _submit
            logger.exception("collecting verdicts failed")
            return self._errors(count, f"verifier failed: {type(exc).__name__}: {exc}")

    def _errors(self, count: int, reason: str) -> list[Verdict]:
        return [Verdict.of(Status.error, rewards=self.config.rewards, details={"reason": reason})
                for _ in range(count)]

    async def averify_batch(self, items: Iterable[VerifyItem | dict[str, Any]]) -> list[Verdict]:
        import asyncio  # here, not at import: `scalerl-env verify` starts scoring sooner without it

        return await asyncio.to_thread(self.verify_batch, list(items))

    @property
    def closed(self) -> bool:
        return self._closed

    def ready(self) -> bool:
        return not self._closed and all(v.ready() for v in self._verifiers.values())

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {"closed": self._closed, "ready": self.ready()}
        for name, verifier in self._verifiers.items():
            try:
                out[name] = verifier.info()
            except Exception as exc:  # info must never take the server down
                out[name] = {"error": f"{type(exc).__name__}: {exc}"}
        return out

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for name, verifier in self._verifiers.items():
            try:
                verifier.close()
            except Exception:
                logger.exception("closing the %s verifier failed", name)


_DEFAULT_POOLS: dict[str, VerifierPool] = {}
_DEFAULT_LOCK = threading.Lock()


def default_pool(config: VerifierConfig | None = None) -> VerifierPool:
    """The process-wide pool for `config` (created on first use, closed at exit)."""
    config = config or VerifierConfig()
    key = config.model_dump_json()
    with _DEFAULT_LOCK:
        pool = _DEFAULT_POOLS.get(key)
        if pool is None or pool.closed:
            if not _DEFAULT_POOLS:
                atexit.register(close_default_pools)
            pool = _DEFAULT_POOLS[key] = VerifierPool(config)
        return pool


def close_default_pools() -> None:
    with _DEFAULT_LOCK:
        pools = list(_DEFAULT_POOLS.values())
        _DEFAULT_POOLS.clear()
    for pool in pools:
        pool.close()


def verify_batch(items: Iterable[VerifyItem | dict[str, Any]], *,
                 config: VerifierConfig | None = None) -> list[Verdict]:
    """Score `items` in input order with the process-wide pool for `config`."""
    return default_pool(config).verify_batch(items)
