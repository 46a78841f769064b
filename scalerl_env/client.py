"""Python client of the reward server: `RewardClient` (sync) and `AsyncRewardClient` (async).

    with RewardClient("http://a:8000,http://b:8000", token="...") as client:
        verdicts = client.verify(items)            # any number of items; batched, answered in order

Guarantees:
- `verify` splits the items into batches of `batch_size` and returns one verdict per item, in order
  (the async client sends up to `concurrency` batches at once).
- One URL or several (a list, or one comma-separated string; without one, `$SCALERL_REWARD_URL`, else
  `DEFAULT_URL`): requests go to the replica with the fewest of this client's requests in flight, fail
  over and set failing replicas aside as `scalerl.env.replicas` describes; `stats()` counts it all.
- Every scoring request (`verify` batches, `get_reward`) carries an `Idempotency-Key` header, one per
  request, the same on each of its re-sends: a server that records each (key, item index) once makes
  the re-send of a timed-out or dropped request safe, so those are retried too.
- Refused connections and 503s are retried (up to `max_retries` re-sends, backoff with jitter,
  honouring `Retry-After`, capped at `max_backoff_s`); timeouts and dropped connections only for
  requests with a key or that only read. `idempotent=False` sends no key and does not retry them.
- The bearer token (`token=`, else `$SCALERL_REWARD_TOKEN`) goes with every request; `verify=` is
  httpx's: `False`, or a CA bundle path for a server's self-signed certificate.
- What is not retried raises `RewardServerError` with the status (None: no response) and `detail`.
"""

from __future__ import annotations

import asyncio
import os
import random
import ssl
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx
from scalerl.env.contracts.records import Verdict, VerifyItem
from scalerl.env.replicas import Attempts, ClientStats, ReplicaSet, parse_urls
from scalerl.env.server.models import IDEMPOTENCY_HEADER, LedgerQueryResponse, RewardResponse, VerifyResponse
from typing_extensions import Self

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV = "SCALERL_REWARD_URL"
TOKEN_ENV = "SCALERL_REWARD_TOKEN"
# Requests that change nothing: replaying them is always safe.
_READ_ONLY = frozenset({"/v1/ledger/query"})


class RewardServerError(RuntimeError):
    def __init__(self, status: int | None, detail: Any, url: str) -> None:
        super().__init__(f"{url}: {status if status is not None else 'no response'}: {detail}")
        self.status = status
        self.detail = detail


def client_token(token: str | None = None) -> str | None:
    """`token`, else `$SCALERL_REWARD_TOKEN`, else None."""
    return token or os.environ.get(TOKEN_ENV) or None


class _ClientBase:
    def __init__(self, base_url: str | Sequence[str] | None = None, *, timeout_s: float = 300.0,
                 batch_size: int = 256, concurrency: int = 8, max_retries: int = 8, backoff_s: float = 0.05,
                 max_backoff_s: float = 5.0, token: str | None = None, verify: bool | str = True,
                 idempotent: bool = True, set_aside_after: int = 3, set_aside_s: float = 30.0) -> None:
        if batch_size < 1 or concurrency < 1 or max_retries < 0:
            raise ValueError("batch_size and concurrency must be >= 1, max_retries >= 0")
        self.urls = parse_urls(base_url or os.environ.get(URL_ENV) or DEFAULT_URL)
        self.base_url = self.urls[0]
        self.replicas = ReplicaSet(self.urls, set_aside_after=set_aside_after, set_aside_s=set_aside_s)
        self.timeout = httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))
        self.limits = httpx.Limits(max_connections=concurrency * len(self.urls),
                                   max_keepalive_connections=concurrency * len(self.urls))
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.idempotent = idempotent
        self.token = client_token(token)
        self.headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        # httpx takes a CA bundle as an SSL context; True keeps its defaults (and SSL_CERT_FILE).
        self.tls_verify: bool | ssl.SSLContext = ssl.create_default_context(cafile=verify) if isinstance(verify, str) \
            else verify

    def _delay_s(self, attempt: int, retry_after: str | None) -> float:
        backoff = min(self.max_backoff_s, self.backoff_s * (2 ** attempt)) * (0.5 + random.random())
        try:
            hinted = float(retry_after) if retry_after is not None else 0.0
        except ValueError:
            hinted = 0.0
        return min(self.max_backoff_s, max(backoff, hinted))

    def _batches(self, items: Sequence[VerifyItem | Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
        payload = [_item_json(item) for item in items]
        for start in range(0, len(payload), self.batch_size):
            yield {"items": payload[start:start + self.batch_size]}

    def _result(self, response: httpx.Response) -> httpx.Response:
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail")
            except ValueError:
                detail = response.text[:500]
            raise RewardServerError(response.status_code, detail, str(response.request.url))
        return response

    def _attempts(self, method: str, path: str, key: str | None) -> tuple[Attempts, dict[str, str]]:
        """The sends of one call and its headers; safe to replay when keyed or read-only."""
        headers = {**self.headers, IDEMPOTENCY_HEADER: key} if key else self.headers
        safe = key is not None or method == "GET" or path in _READ_ONLY
        return Attempts(self.replicas, safe=safe, max_retries=self.max_retries, delay_s=self._delay_s,
                        give_up=RewardServerError), headers

    def _key(self, given: str | None = None) -> str | None:
        """The idempotency key of one scoring request: `given`, else a fresh one (None when disabled)."""
        if given is not None:
            return given
        return uuid.uuid4().hex if self.idempotent else None

    def stats(self) -> ClientStats:
        """Balancing and failover counters: calls, re-sends, failovers, set-asides, per replica."""
        return self.replicas.stats()


def _item_json(item: VerifyItem | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(item, VerifyItem):
        return item.model_dump(mode="json", exclude_none=True)
    return dict(item)


def _reward_body(query: Sequence[str], labels: Sequence[Any], prompts: Sequence[str] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"query": list(query), "labels": list(labels)}
    if prompts is not None:
        body["prompts"] = list(prompts)
    return body


def _batch_key(key: str | None, index: int) -> str | None:
    """A caller's key names the call; batch `index` of it is sent as `key/index`."""
    return None if key is None else f"{key}/{index}"


class RewardClient(_ClientBase):
    """Synchronous client; one connection pool, safe to share between threads."""

    def __init__(self, base_url: str | Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self._http = httpx.Client(timeout=self.timeout, limits=self.limits, verify=self.tls_verify)

    def _request(self, method: str, path: str, json: Any = None, *, key: str | None = None) -> httpx.Response:
        attempts, headers = self._attempts(method, path, key)
        while True:
            replica = attempts.start()
            try:
                outcome: httpx.Response | Exception = self._http.request(
                    method, replica.url + path, json=json, headers=headers)
            except httpx.HTTPError as exc:
                outcome = exc
            except BaseException:  # interrupted: the send is over, its replica must not stay counted in flight
                attempts.replicas.release(replica, ok=True)
                raise
            step = attempts.finish(replica, path, outcome)
            if isinstance(step, httpx.Response):
                return self._result(step)
            time.sleep(step)

    def verify(self, items: Sequence[VerifyItem | Mapping[str, Any]], *,
               idempotency_key: str | None = None) -> list[Verdict]:
        out: list[Verdict] = []
        for i, body in enumerate(self._batches(items)):
            key = self._key(_batch_key(idempotency_key, i))
            response = self._request("POST", "/v1/verify", body, key=key)
            out.extend(VerifyResponse.model_validate_json(response.content).results)
        return out

    def get_reward(self, query: Sequence[str], labels: Sequence[Any], prompts: Sequence[str] | None = None, *,
                   idempotency_key: str | None = None) -> RewardResponse:
        response = self._request("POST", "/get_reward", _reward_body(query, labels, prompts),
                                 key=self._key(idempotency_key))
        return RewardResponse.model_validate_json(response.content)

    def ledger_query(self, sql: str, timeout_s: float | None = None) -> LedgerQueryResponse:
        body = {"sql": sql} if timeout_s is None else {"sql": sql, "timeout_s": timeout_s}
        return LedgerQueryResponse.model_validate_json(self._request("POST", "/v1/ledger/query", body).content)

    def healthy(self) -> bool:
        """Whether the first URL answers /healthz."""
        try:
            return self._http.get(self.base_url + "/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    def readiness(self) -> dict[str, Any]:
        return self._http.get(self.base_url + "/readyz", headers=self.headers).json()

    def metrics_text(self) -> str:
        return self._request("GET", "/metrics").text

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncRewardClient(_ClientBase):
    """Asynchronous client; `verify` sends up to `concurrency` batches at once."""

    def __init__(self, base_url: str | Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self._http = httpx.AsyncClient(timeout=self.timeout, limits=self.limits, verify=self.tls_verify)

    async def _request(self, method: str, path: str, json: Any = None, *, key: str | None = None) -> httpx.Response:
        attempts, headers = self._attempts(method, path, key)
        while True:
            replica = attempts.start()
            try:
                outcome: httpx.Response | Exception = await self._http.request(
                    method, replica.url + path, json=json, headers=headers)
            except httpx.HTTPError as exc:
                outcome = exc
            except BaseException:  # cancelled: the send is over, its replica must not stay counted in flight
                attempts.replicas.release(replica, ok=True)
                raise
            step = attempts.finish(replica, path, outcome)
            if isinstance(step, httpx.Response):
                return self._result(step)
            await asyncio.sleep(step)

    async def verify(self, items: Sequence[VerifyItem | Mapping[str, Any]], *,
                     idempotency_key: str | None = None) -> list[Verdict]:
        gate = asyncio.Semaphore(self.concurrency)

        async def one(i: int, body: dict[str, Any]) -> list[Verdict]:
            key = self._key(_batch_key(idempotency_key, i))
            async with gate:
                response = await self._request("POST", "/v1/verify", body, key=key)
            return VerifyResponse.model_validate_json(response.content).results

        parts = await asyncio.gather(*(one(i, body) for i, body in enumerate(self._batches(items))))
        return [verdict for part in parts for verdict in part]

    async def get_reward(self, query: Sequence[str], labels: Sequence[Any], prompts: Sequence[str] | None = None,
                         *, idempotency_key: str | None = None) -> RewardResponse:
        response = await self._request("POST", "/get_reward", _reward_body(query, labels, prompts),
                                       key=self._key(idempotency_key))
        return RewardResponse.model_validate_json(response.content)

    async def ledger_query(self, sql: str, timeout_s: float | None = None) -> LedgerQueryResponse:
        body = {"sql": sql} if timeout_s is None else {"sql": sql, "timeout_s": timeout_s}
        response = await self._request("POST", "/v1/ledger/query", body)
        return LedgerQueryResponse.model_validate_json(response.content)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
