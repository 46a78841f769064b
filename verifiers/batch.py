"""Batch API: `verify_batch(items) -> list[Verdict]` and the `VerifierPool` that serves it.

Per math item, in the calling thread: extract the answer (`verifiers.extract`); no answer ->
`no_answer`, an answer over `max_answer_chars` -> `unparsable`; then the exact fast path
(`verifiers.math_fast`, memoised across batches); only what is left goes to the persistent workers
(`verifiers.pool`), unless the pool's bounded reply cache holds a sympy verdict for the same pair from an
earlier batch (correct / wrong / unparsable only: timeouts and crashes are never cached); identical
(reference answer, extracted answer) pairs are sent once per batch (RL groups repeat answers).
Code items go to `verifiers.code.CodeVerifier(config.code).verify_many`, imported lazily;
while it is unavailable they are answered `error` with the reason.

Guarantees: verdicts come back in input order with `Verdict.id = item.id`; a `VerifierPool` may be
used from many threads at once and from asyncio (`averify_batch` runs off the event loop); model
text never raises (malformed *items* do: `ValueError` naming the item index and field); `close()` is
idempotent and kills the workers. The module-level `verify_batch` uses one process-wide pool per
distinct config, created on first use (never at import) and closed at interpreter exit.
"""

from __future__ import annotations

import atexit
import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

from pydantic import ValidationError

from scalerl_env.contracts.config import validation_problems
from scalerl_env.contracts.records import Status, Verdict, VerifyItem
from verifiers.config import VerifierConfig
from verifiers.extract import clean_answer, extract_answer
from verifiers.math_fast import fast_verdict
from verifiers.pool import MathWorkerPool

logger = logging.getLogger(__name__)
REPLY_CACHE_SIZE = 1 << 16  # sympy verdicts kept per pool, across batches (a few MB at most)


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
    """Math workers (started now, warming in the background) plus the code verifier (on first use)."""

    def __init__(self, config: VerifierConfig | None = None):
        self.config = config or VerifierConfig()
        self._math = MathWorkerPool(self.config.math)
        self._code = None
        self._code_error: str | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._replies: OrderedDict[tuple[str, str], dict] = OrderedDict()
        self._replies_lock = threading.Lock()

    def __enter__(self) -> VerifierPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def verify_batch(self, items: Iterable[VerifyItem | dict[str, Any]]) -> list[Verdict]:
        items = as_items(items)
        verdicts: list[Verdict | None] = [None] * len(items)
        math_idx = [i for i, it in enumerate(items) if it.domain == "math"]
        code_idx = [i for i, it in enumerate(items) if it.domain == "code"]
        pending = self._start_math(items, math_idx, verdicts)
        if code_idx:
            for i, verdict in zip(code_idx, self._verify_code([items[i] for i in code_idx])):
                verdicts[i] = verdict
        self._finish_math(items, pending, verdicts)
        return [v.model_copy(update={"id": items[i].id}) for i, v in enumerate(verdicts)]

    async def averify_batch(self, items: Iterable[VerifyItem | dict[str, Any]]) -> list[Verdict]:
        import asyncio  # here, not at import: `scalerl-env verify` starts scoring sooner without it

        return await asyncio.to_thread(self.verify_batch, list(items))

    def ready(self) -> bool:
        return not self._closed and self._math.ready()

    def info(self) -> dict[str, Any]:
        code: dict[str, Any] | None = None
        if self._code is not None:
            try:
                code = self._code.info() if hasattr(self._code, "info") else {"layers": self._code.layers()}
            except Exception as exc:  # noqa: BLE001 - info must never take the server down
                code = {"error": f"{type(exc).__name__}: {exc}"}
        elif self._code_error:
            code = {"error": self._code_error}
        return {"closed": self._closed, "ready": self.ready(), "math": self._math.info(), "code": code}

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            code, self._code = self._code, None
        self._math.close()
        if code is not None:
            try:
                code.close()
            except Exception:
                logger.exception("closing the code verifier failed")

    # ----------------------------------------------------------------------------------------- math
    def _start_math(self, items: list[VerifyItem], indices: list[int], verdicts: list) -> dict:
        """Decide what can be decided here; submit the rest once per distinct pair. Returns pending."""
        cfg, rewards = self.config.math, self.config.rewards
        pending: dict[tuple, tuple[Any, list[int], dict]] = {}
        extracted: dict[str, Any] = {}  # identical completions in one batch are extracted once
        for i in indices:
            start = time.perf_counter()
            completion = items[i].completion
            found = extracted.get(completion)
            if found is None:
                found = extracted[completion] = extract_answer(
                    completion, max_completion_chars=cfg.max_completion_chars, max_answer_chars=cfg.max_answer_chars)
            details: dict[str, Any] = {"extracted": found.answer or None, "method": found.method or None}
            if found.kind != "answer":
                status = Status.no_answer if found.kind == "no_answer" else Status.unparsable
                if found.kind == "too_long":
                    details["reason"] = f"answer longer than max_answer_chars={cfg.max_answer_chars}"
                verdicts[i] = _verdict(status, details, rewards, time.perf_counter() - start)
                continue
            gold = clean_answer(items[i].answer or "")
            decided = cached_fast_verdict(gold, found.answer) if cfg.fast_path else None
            if decided is not None:
                verdicts[i] = _verdict(Status.correct if decided else Status.wrong, {**details, "path": "fast"},
                                       rewards, time.perf_counter() - start)
                continue
            key = (gold, found.answer) if cfg.dedupe else (gold, found.answer, i)
            if key in pending:
                pending[key][1].append(i)
            else:
                pending[key] = (self._submit(gold, found.answer), [i], details)
        return pending

    def _submit(self, gold: str, pred: str) -> Future:
        """A worker's reply for the pair; from the bounded cache of earlier sympy verdicts when known."""
        key = (gold, pred)
        with self._replies_lock:
            reply = self._replies.get(key)
            if reply is not None:
                self._replies.move_to_end(key)
        if reply is not None:
            done: Future = Future()
            done.set_result({**reply, "cached": True})
            return done
        future = self._math.submit(gold, pred)
        future.add_done_callback(lambda f: self._remember(key, f.result()))
        return future

    def _remember(self, key: tuple[str, str], reply: dict) -> None:
        # Only verdicts that depend on the pair alone; a timeout or a crash may not repeat.
        if reply.get("status") in ("correct", "wrong", "unparsable") :
            with self._replies_lock:
                self._replies[key] = reply
                while len(self._replies) > REPLY_CACHE_SIZE:
                    self._replies.popitem(last=False)

    def _finish_math(self, items: list[VerifyItem], pending: dict, verdicts: list) -> None:
        rewards = self.config.rewards
        for future, indices, details in pending.values():
            reply = future.result()
            status = Status(reply["status"])
            out = {**details, "path": "sympy"}
            if reply.get("reason"):
                out["reason"] = reply["reason"]
            if reply.get("cached"):
                out["cached"] = True
            verdict = _verdict(status, out, rewards, reply.get("elapsed_s", 0.0))
            verdicts[indices[0]] = verdict
            for i in indices[1:]:
                verdicts[i] = verdict.model_copy(update={"details": {**out, "deduplicated": True}})

    # ----------------------------------------------------------------------------------------- code
    def _verify_code(self, items: list[VerifyItem]) -> list[Verdict]:
        rewards = self.config.rewards
        verifier = self._code_verifier()
        if verifier is None:
            return [Verdict.of(Status.error, rewards=rewards,
                               details={"reason": f"code verifier unavailable: {self._code_error}"})
                    for _ in items]
        try:
            # The reward table is this pool's config, whichever table the code verifier applied.
            return [v.model_copy(update={"reward": rewards.reward(v.status)}) for v in verifier.verify_many(items)]
        except Exception as exc:
            logger.exception("code verifier failed on a batch of %d items", len(items))
            return [Verdict.of(Status.error, rewards=rewards,
                               details={"reason": f"code verifier failed: {type(exc).__name__}: {exc}"})
                    for _ in items]

    def _code_verifier(self):
        with self._lock:
            if self._code is None and not self._closed:
                try:
                    from verifiers.code import CodeVerifier

                    self._code, self._code_error = CodeVerifier(self.config.code), None
                except Exception as exc:  # noqa: BLE001 - not there yet, or its sandbox cannot start here
                    self._code_error = f"{type(exc).__name__}: {exc}"
            return self._code


def _verdict(status: Status, details: dict, rewards, elapsed_s: float) -> Verdict:
    """A Verdict built without re-validation: every field comes from this module, already typed."""
    return Verdict.model_construct(status=status, reward=rewards.reward(status), details=details,
                                   elapsed_s=elapsed_s, id=None)


@functools.lru_cache(maxsize=1 << 16)
def cached_fast_verdict(gold: str, pred: str) -> bool | None:
    """`fast_verdict`, memoised across batches (a prompt's gold meets the same answers step after step)."""
    return fast_verdict(gold, pred)


_DEFAULT_POOLS: dict[str, VerifierPool] = {}
_DEFAULT_LOCK = threading.Lock()


def default_pool(config: VerifierConfig | None = None) -> VerifierPool:
    """The process-wide pool for `config` (created on first use, closed at exit)."""
    config = config or VerifierConfig()
    key = config.model_dump_json()
    with _DEFAULT_LOCK:
        pool = _DEFAULT_POOLS.get(key)
        if pool is None or pool._closed:
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
