"""Recording verdicts: into the attached ledger, or (replica mode) through the ledger owner.

`record` is what a scoring request runs after its items were scored. With `--ledger` it commits them in
this process (insert-once per (idempotency key, item index) when the request has a key); with
`--ledger-owner URL` it hands them to the `OwnerLink`, which sends them to the owner's
`POST /v1/ledger/ingest` and waits for the commit there.

Guarantees of the link:
- Acknowledged = committed at the owner: `OwnerLink.commit` returns only after the owner answered 200,
  which it does after `Ledger.record_once` committed the rows.
- Rows of concurrent requests are coalesced: while one forward is in flight the next requests' rows
  queue, and the next POST carries all of them (up to `owner.batch_rows`).
- Owner unreachable (refused, timeout, 5xx): the same batch is re-sent, with the same keys, after a
  doubling pause, until the owner commits it; the owner's idempotency table makes re-sending a batch it
  had committed (its answer was lost) a no-op. A request that waits longer than `owner.wait_s` gets
  503, but its rows stay buffered and are still sent, so the client's retry (same key) finds them
  recorded. While `owner.max_buffered_rows` rows wait, new requests get 503 before they are scored.
- A row leaves the buffer only when the owner committed it, or refused it for good (4xx, e.g. a key
  reused for another prompt), and then the request that waits for it gets that error: nothing is dropped
  silently.
Not guaranteed: rows buffered in a replica that dies are lost; they were never acknowledged, and the
client's retry through another replica records them. A request without an idempotency key gets one made
up for the link, so the link's own re-sends count once, but a client's retry of it may count twice.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

import httpx
from scalerl.env.contracts.records import Verdict, VerifyItem
from scalerl.env.server.models import IngestRow, LedgerIngestRequest, LedgerIngestResponse, RecordedItem
from scalerl.env.server.server_config import OwnerLinkConfig

logger = logging.getLogger(__name__)
INGEST_PATH = "/v1/ledger/ingest"
QUERY_PATH = "/v1/ledger/query"
_ITEM_FIELDS = tuple(RecordedItem.model_fields)


class OwnerUnavailable(RuntimeError):
    """The owner did not commit in time, or the buffer is full: answered 503 (retry with the same key)."""


class OwnerRefused(RuntimeError):
    """The owner refused the rows for good (its 4xx status and detail are passed on)."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(f"ledger owner answered {status}: {detail}")
        self.status, self.detail = status, detail


def ingest_rows(key: str, items: Sequence[VerifyItem], verdicts: Sequence[Verdict], keep: Sequence[int]
                ) -> list[IngestRow]:
    """The rows to record for items `keep` (those with a prompt_id), built without re-validation (the item
    and verdict were validated when they were made)."""
    return [IngestRow.model_construct(key=key, index=i, verdict=verdicts[i], item=RecordedItem.model_construct(
        **{name: getattr(items[i], name) for name in _ITEM_FIELDS})) for i in keep]


def commit_rows(ledger: Any, rows: Sequence[IngestRow], items: Sequence[VerifyItem] | None = None
                ) -> dict[int, Verdict]:
    """Owner side: record `rows` once per (key, index); the verdicts recorded before, by row position.
    `items`: the rows' scored items, when this process has them (they carry the completion, which a
    forwarded row does not)."""
    from scalerl.curriculum.ledger.attempts import rows_from_verdicts

    cols = rows_from_verdicts(items or [r.item for r in rows], [r.verdict for r in rows], step=None,
                              policy_version=None)
    replayed = ledger.record_once(cols, [(r.key, r.index, r.verdict.model_dump_json()) for r in rows])
    return {pos: Verdict.model_validate_json(text) for pos, text in replayed.items()}


def record(ledger: Any, link: OwnerLink | None, items: Sequence[VerifyItem], verdicts: list[Verdict],
           key: str | None) -> int:
    """Record the items that carry a prompt_id; a replayed (key, index) gets the verdict recorded first,
    written into `verdicts`. Returns the number of rows this call appended."""
    keep = [i for i, item in enumerate(items) if item.prompt_id is not None]
    if not keep:
        return 0
    if link is None and key is None:
        ledger.record([items[i] for i in keep], [verdicts[i] for i in keep])
        return len(keep)
    rows = ingest_rows(key or f"replica-{uuid.uuid4().hex}", items, verdicts, keep)
    replayed = link.commit(rows) if link is not None else commit_rows(ledger, rows, [items[i] for i in keep])
    for pos, verdict in replayed.items():
        verdicts[keep[pos]] = verdict
    return len(keep) - len(replayed)


@dataclass
class _Pending:
    rows: list[IngestRow]
    future: Future


class OwnerLink:
    """The replica's connection to the ledger owner: a forwarding thread over a bounded buffer."""

    def __init__(self, url: str, config: OwnerLinkConfig, headers: dict[str, str] | None = None,
                 query_timeout_s: float = 70.0) -> None:
        self.url = url.rstrip("/")
        self.config = config
        self._client = httpx.Client(timeout=config.timeout_s, headers=headers or {})
        self._query_client = httpx.Client(timeout=query_timeout_s, headers=headers or {})
        self._cond = threading.Condition()
        self._queue: deque[_Pending] = deque()
        self.buffered = 0  # rows handed to the link and not yet committed or refused
        self.forwards = self.failures = 0
        self.last_error: str | None = None
        self._stop_at: float | None = None
        self._thread = threading.Thread(target=self._run, name="scalerl-owner-link", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------------------------- scoring threads
    def has_room(self, rows: int) -> bool:
        return self.buffered + rows <= self.config.max_buffered_rows

    def commit(self, rows: list[IngestRow]) -> dict[int, Verdict]:
        """Block until the owner committed `rows`; the replayed ones' recorded verdicts, by position."""
        pending = _Pending(rows, Future())
        with self._cond:
            if self._stop_at is not None:
                raise OwnerUnavailable("the replica is shutting down")
            if not self.has_room(len(rows)):
                raise OwnerUnavailable(f"{self.buffered} verdict rows wait for the ledger owner {self.url} "
                                       f"(owner.max_buffered_rows={self.config.max_buffered_rows})")
            self._queue.append(pending)
            self.buffered += len(rows)
            self._cond.notify()
        try:
            return pending.future.result(timeout=self.config.wait_s)
        except FutureTimeout:
            raise OwnerUnavailable(
                f"the ledger owner {self.url} has not committed within owner.wait_s={self.config.wait_s} "
                f"({self.last_error or 'slow'}); the rows stay buffered and are still sent") from None

    def query(self, body: bytes) -> httpx.Response:
        """Proxy a ledger query to the owner, answer passed through as it is."""
        try:
            return self._query_client.post(self.url + QUERY_PATH, content=body,
                                           headers={"content-type": "application/json"})
        except httpx.HTTPError as exc:
            raise OwnerUnavailable(f"ledger owner {self.url} unreachable: {type(exc).__name__}: {exc}") from None

    def close(self, timeout_s: float) -> None:
        """Keep sending what is buffered for up to `timeout_s`, then fail what is left (never acknowledged)."""
        with self._cond:
            self._stop_at = time.monotonic() + timeout_s
            self._cond.notify()
        self._thread.join(timeout_s + self.config.timeout_s + 1)
        with self._cond:
            left, self._queue = list(self._queue), deque()
        for pending in left:
            self._done(pending, exc=OwnerUnavailable("the replica shut down before the owner committed"))
        self._client.close()
        self._query_client.close()

    # ---------------------------------------------------------------------------------- forwarding thread
    def _take(self) -> list[_Pending]:
        with self._cond:
            while not self._queue and self._stop_at is None:
                self._cond.wait()
            batch: list[_Pending] = []
            rows = 0
            while self._queue and (not batch or rows + len(self._queue[0].rows) <= self.config.batch_rows):
                batch.append(self._queue.popleft())
                rows += len(batch[-1].rows)
            return batch

    def _run(self) -> None:
        while batch := self._take():
            self._deliver(batch)

    def _deliver(self, batch: list[_Pending]) -> None:
        delay = self.config.backoff_s
        while (outcome := self._send(batch)) is False:
            if self._stop_at is not None and time.monotonic() + delay > self._stop_at:
                for pending in batch:
                    self._done(pending, exc=OwnerUnavailable("the replica shut down before the owner committed"))
                return
            time.sleep(delay)
            delay = min(self.config.max_backoff_s, delay * 2)
        if outcome is not True:  # refused for good: find whose rows, so the other requests still commit
            for pending in outcome:
                self._deliver([pending])

    def _send(self, batch: list[_Pending]) -> bool | list[_Pending]:
        """One forward: True when done (committed, or refused and the waiter told), False when it should be
        re-sent (owner unreachable, timeout, 5xx), or the batch to re-send one request at a time."""
        rows = [row for pending in batch for row in pending.rows]
        body = LedgerIngestRequest.model_construct(rows=rows).model_dump_json()
        self.forwards += 1
        try:
            response = self._client.post(self.url + INGEST_PATH, content=body,
                                         headers={"content-type": "application/json"})
        except httpx.HTTPError as exc:
            return self._failed(f"{type(exc).__name__}: {exc}")
        if response.status_code == 200:
            replayed = {r.row: r.verdict for r in LedgerIngestResponse.model_validate_json(response.content).replayed}
            offset = 0
            for pending in batch:
                n = len(pending.rows)
                self._done(pending, {i: replayed[offset + i] for i in range(n) if offset + i in replayed})
                offset += n
            return True
        if response.status_code in (408, 429) or response.status_code >= 500:
            return self._failed(f"HTTP {response.status_code}: {response.text[:200]}")
        if len(batch) > 1:
            return batch
        try:
            detail = response.json().get("detail")
        except ValueError:
            detail = response.text[:500]
        logger.error("ledger owner %s refused %d rows: %s %s", self.url, len(rows), response.status_code, detail)
        self._done(batch[0], exc=OwnerRefused(response.status_code, detail))
        return True

    def _failed(self, error: str) -> bool:
        self.failures += 1
        if self.last_error is None or self.failures % 50 == 1:
            logger.warning("ledger owner %s: forward failed (%s); re-sending", self.url, error)
        self.last_error = error
        return False

    def _done(self, pending: _Pending, result: dict[int, Verdict] | None = None,
              exc: BaseException | None = None) -> None:
        with self._cond:
            self.buffered -= len(pending.rows)
        if pending.future.done():
            return
        if exc is not None:
            pending.future.set_exception(exc)
        else:
            pending.future.set_result(result or {})
        self.last_error = None if exc is None else self.last_error


class LinkCollector:
    """Prometheus series of a replica's link, read at scrape time: rows waiting, forwards, failed forwards."""

    def __init__(self, link: OwnerLink) -> None:
        self.link = link

    def describe(self) -> list:
        return []

    def collect(self) -> list:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        link = self.link
        return [GaugeMetricFamily("scalerl_owner_buffered_rows", "Verdict rows waiting for the ledger owner's commit",
                                  value=link.buffered),
                CounterMetricFamily("scalerl_owner_forwards", "POST /v1/ledger/ingest sent to the owner",
                                    value=link.forwards),
                CounterMetricFamily("scalerl_owner_forward_failures", "Forwards that failed and were re-sent",
                                    value=link.failures)]
