"""What one running reward server holds: the verifier pool, the optional ledger, limits and metrics.

Guarantees:
- Scoring runs on worker threads that call the (thread-safe) verifier pool, never on the event loop,
  so one slow item does not stall other requests, health checks or metrics.
- Items that carry a `prompt_id` are committed to the attached ledger, or (replica mode, `ledger_owner`)
  at the ledger owner, before their request is answered: an acknowledged verdict is a committed one
  (`scalerl.env.server.owner_link.record`). With an `Idempotency-Key` each (key, item index) is recorded
  once, and a replay is answered with the verdicts recorded first.
- Items count against `max_items_in_flight` from admission until the pool has finished with them, even
  when their request already got 504 for passing its deadline; the bound holds for work, not for replies.

Not guaranteed: a request answered 504 may still have its verdicts recorded afterwards (they were
computed; the client just stopped waiting).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from typing import Any, Protocol

from fastapi import HTTPException
from scalerl.env.contracts.records import Verdict, VerifyItem
from scalerl.env.server.limits import InFlight
from scalerl.env.server.metrics import ServerMetrics
from scalerl.env.server.owner_link import LinkCollector, OwnerLink, OwnerRefused, OwnerUnavailable, record
from scalerl.env.server.server_config import ServerConfig

logger = logging.getLogger(__name__)


class Pool(Protocol):
    def verify_batch(self, items: Sequence[VerifyItem]) -> list[Verdict]: ...
    def ready(self) -> bool: ...
    def info(self) -> dict[str, Any]: ...
    def close(self) -> None: ...


def build_version() -> str:
    try:
        return metadata.version("scalerl")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def detect_sandbox_layers(code: Any) -> dict[str, Any]:
    """The host's sandbox layers (reported by /readyz) and whether they meet `code.sandbox`, the
    minimum level the code verifier insists on; the error text when detection itself fails."""
    try:
        from scalerl.verifiers.code.sandbox import SandboxUnavailable, detect_layers, enabled_layers

        out = {**detect_layers(), "minimum": code.sandbox, "meets_minimum": True}
        try:
            enabled_layers(code.sandbox, getattr(code, "disable_layers", ()))
        except SandboxUnavailable as exc:
            out.update(meets_minimum=False, unavailable=str(exc))
        return out
    except Exception as exc:  # reported through /readyz (not ready), not fatal here
        return {"error": f"{type(exc).__name__}: {exc}", "meets_minimum": False}


class ServerState:
    def __init__(self, config: ServerConfig, pool: Pool | None = None, ledger: Any | None = None) -> None:
        self.config = config
        self.pool = pool
        self.owns_pool = pool is None
        self.ledger = ledger
        self.owns_ledger = ledger is None
        self.owner: OwnerLink | None = None  # replica mode: where verdicts are committed
        self.draining = False
        self.sandbox_layers: dict[str, Any] = {}
        self.inflight = InFlight(config.limits.max_items_in_flight)
        self.metrics = ServerMetrics(self.pool_info, build_version())
        self.executor = ThreadPoolExecutor(config.limits.concurrent_batches, thread_name_prefix="scalerl-verify")

    # ------------------------------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Open the ledger first (it fails fast when another process owns it), then start the pool."""
        try:
            if self.ledger is None and self.config.ledger:
                from scalerl.curriculum.ledger.store import Ledger

                self.ledger = await asyncio.to_thread(
                    Ledger, self.config.ledger, retirement=self.config.ledger_retirement,
                    config=self.config.ledger_settings)
            if self.config.ledger_owner:
                self.owner = self._owner_link()
                self.metrics.registry.register(LinkCollector(self.owner))
            if self.pool is None:
                from scalerl.verifiers import VerifierPool

                self.pool = await asyncio.to_thread(VerifierPool, self.config.verifier)
            self.sandbox_layers = await asyncio.to_thread(detect_sandbox_layers, self.config.verifier.code)
            await asyncio.to_thread(self._prestart_threads)
        except BaseException as exc:
            logger.error("reward server start-up failed: %s", exc)
            await self.stop()
            raise
        logger.info("reward server ready (ledger: %s)", self.config.ledger or "none")

    async def stop(self) -> None:
        """Called after uvicorn drained the requests: kill sandboxes/workers, flush and close the ledger."""
        self.draining = True
        if self.pool is not None and self.owns_pool:
            await asyncio.to_thread(self.pool.close)
        # No recording may race the ledger's close below.
        await asyncio.to_thread(self.executor.shutdown, wait=True, cancel_futures=True)
        if self.owner is not None:  # rows of requests answered 503 may still wait: send them while we can
            await asyncio.to_thread(self.owner.close, self.config.drain_timeout_s)
        if self.ledger is not None:
            await asyncio.to_thread(self.ledger.flush)
            if self.owns_ledger:
                await asyncio.to_thread(self.ledger.close)
        logger.info("reward server stopped")

    def _prestart_threads(self) -> None:
        """Start every scoring thread now: the executor otherwise starts them on the event loop under the
        first burst of requests, and each start blocks the loop until the new thread runs (seen in the
        bench_server profile)."""
        n = self.config.limits.concurrent_batches
        barrier = threading.Barrier(n)
        futures = [self.executor.submit(barrier.wait, 10.0) for _ in range(n)]
        for future in futures:
            try:
                future.result()
            except threading.BrokenBarrierError:  # a slow host: the threads exist anyway
                pass

    def _owner_link(self) -> OwnerLink:
        from scalerl.env.server.auth import bearer_headers, owner_token

        return OwnerLink(self.config.ledger_owner, self.config.owner, bearer_headers(owner_token(self.config.security)),
                         query_timeout_s=self.config.max_ledger_query_timeout_s + 10)

    def pool_info(self) -> dict[str, Any]:
        return self.pool.info() if self.pool is not None else {}

    # ------------------------------------------------------------------------------------- scoring
    async def score(self, items: Sequence[VerifyItem], key: str | None = None) -> list[Verdict]:
        """Admit, score off the loop, record, answer: 413/503/504 as `HTTPException`s."""
        limits = self.config.limits
        if self.draining or self.pool is None:
            self.metrics.rejected.labels(reason="draining").inc()
            raise HTTPException(503, "server is starting or shutting down",
                                headers={"Retry-After": str(limits.retry_after_s)})
        n = len(items)
        if n > limits.max_batch_items:
            self.metrics.rejected.labels(reason="too_many_items").inc()
            raise HTTPException(413, f"batch of {n} items exceeds limits.max_batch_items={limits.max_batch_items}")
        if n == 0:
            return []
        if self.owner is not None and not self.owner.has_room(n):
            self.metrics.rejected.labels(reason="overloaded").inc()
            raise HTTPException(503, f"{self.owner.buffered} verdict rows wait for the ledger owner",
                                headers={"Retry-After": str(limits.retry_after_s)})
        if not self.inflight.try_acquire(n):
            self.metrics.rejected.labels(reason="overloaded").inc()
            raise HTTPException(503, f"{self.inflight.count} items in flight; limit {limits.max_items_in_flight}",
                                headers={"Retry-After": str(limits.retry_after_s)})
        self.metrics.in_flight.set(self.inflight.count)
        future = asyncio.get_running_loop().run_in_executor(self.executor, self._score_and_record, list(items), key)
        future.add_done_callback(lambda _f: self._release(n))
        try:
            verdicts = await asyncio.wait_for(asyncio.shield(future), timeout=limits.request_deadline_s)
        except asyncio.TimeoutError:
            self.metrics.rejected.labels(reason="deadline").inc()
            raise HTTPException(
                504, f"not scored within limits.request_deadline_s={limits.request_deadline_s}") from None
        except OwnerUnavailable as exc:
            self.metrics.rejected.labels(reason="overloaded").inc()
            raise HTTPException(503, str(exc), headers={"Retry-After": str(limits.retry_after_s)}) from None
        except OwnerRefused as exc:
            raise HTTPException(exc.status, f"ledger owner: {exc.detail}") from None
        except Exception as exc:
            if type(exc).__name__ == "IdempotencyConflict":  # scalerl.curriculum.ledger is imported only with a ledger
                raise HTTPException(409, str(exc)) from None
            logger.exception("scoring a batch of %d items failed", n)
            self.metrics.rejected.labels(reason="internal").inc()
            raise HTTPException(500, f"scoring or recording failed: {type(exc).__name__}: {exc}") from None
        self.metrics.observe((item.domain for item in items), verdicts)
        return verdicts

    def _release(self, n: int) -> None:
        self.inflight.release(n)
        self.metrics.in_flight.set(self.inflight.count)

    def _score_and_record(self, items: list[VerifyItem], key: str | None = None) -> list[Verdict]:
        """Runs on a worker thread."""
        verdicts = self.pool.verify_batch(items)
        if len(verdicts) != len(items):
            raise RuntimeError(f"verifier returned {len(verdicts)} verdicts for {len(items)} items")
        for item, verdict in zip(items, verdicts):
            if verdict.id is None:
                verdict.id = item.id
        if self.ledger is not None or self.owner is not None:
            recorded = record(self.ledger, self.owner, items, verdicts, key)
            if recorded and self.owner is None:
                self.metrics.ledger_records.inc(recorded)
        return verdicts
