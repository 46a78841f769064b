"""Python client of the reward server: `RewardClient` (sync) and `AsyncRewardClient` (async).

    with RewardClient("http://127.0.0.1:8000") as client:
        verdicts = client.verify(items)            # any number of items; batched, answered in order

Guarantees:
- `verify` splits the items into batches of `batch_size` and returns one verdict per item, in order
  (the async client sends up to `concurrency` batches at once).
- A 503 (overloaded, shutting down) and a refused connection are retried with exponential backoff
  and jitter, honouring `Retry-After` (capped at `max_backoff_s`), up to `max_retries` times. Those
  requests were never scored, so retrying cannot record a verdict twice.
- Timeouts and other errors are not retried (the server may have scored and recorded the batch);
  they raise `RewardServerError` with the status and the server's `detail`.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx
from typing_extensions import Self

from scalerl_env.contracts.records import Verdict, VerifyItem
from scalerl_env.server.models import LedgerQueryResponse, RewardResponse, VerifyResponse

DEFAULT_URL = "http://127.0.0.1:8000"
_RETRYABLE_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout)


class RewardServerError(RuntimeError):
    def __init__(self, status: int | None, detail: Any, url: str) -> None:
        super().__init__(f"{url}: {status if status is not None else 'no response'}: {detail}")
        self.status = status
        self.detail = detail


class _ClientBase:
    def __init__(self, base_url: str = DEFAULT_URL, *, timeout_s: float = 300.0, batch_size: int = 256,
                 concurrency: int = 8, max_retries: int = 8, backoff_s: float = 0.05,
                 max_backoff_s: float = 5.0) -> None:
        if batch_size < 1 or concurrency < 1 or max_retries < 0:
            raise ValueError("batch_size and concurrency must be >= 1, max_retries >= 0")
        self.base_url = base_url.rstrip("/")
        self.timeout = httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))
        self.limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s

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


def _item_json(item: VerifyItem | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(item, VerifyItem):
        return item.model_dump(mode="json", exclude_none=True)
    return dict(item)


def _reward_body(query: Sequence[str], labels: Sequence[Any], prompts: Sequence[str] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"query": list(query), "labels": list(labels)}
    if prompts is not None:
        body["prompts"] = list(prompts)
    return body


class RewardClient(_ClientBase):
    """Synchronous client; one connection pool, safe to share between threads."""

    def __init__(self, base_url: str = DEFAULT_URL, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self._http = httpx.Client(base_url=self.base_url, timeout=self.timeout, limits=self.limits)

    def _request(self, method: str, path: str, json: Any = None) -> httpx.Response:
        for attempt in range(self.max_retries + 1):
            try:
                response = self._http.request(method, path, json=json)
            except _RETRYABLE_ERRORS as exc:
                if attempt == self.max_retries:
                    raise RewardServerError(None, f"cannot connect: {exc}", self.base_url + path) from exc
                time.sleep(self._delay_s(attempt, None))
                continue
            except httpx.HTTPError as exc:
                raise RewardServerError(None, f"{type(exc).__name__}: {exc}", self.base_url + path) from exc
            if response.status_code != 503 or attempt == self.max_retries:
                return self._result(response)
            time.sleep(self._delay_s(attempt, response.headers.get("retry-after")))
        raise AssertionError("unreachable")

    def verify(self, items: Sequence[VerifyItem | Mapping[str, Any]]) -> list[Verdict]:
        out: list[Verdict] = []
        for body in self._batches(items):
            out.extend(VerifyResponse.model_validate_json(self._request("POST", "/v1/verify", body).content).results)
        return out

    def get_reward(self, query: Sequence[str], labels: Sequence[Any],
                   prompts: Sequence[str] | None = None) -> RewardResponse:
        response = self._request("POST", "/get_reward", _reward_body(query, labels, prompts))
        return RewardResponse.model_validate_json(response.content)

    def ledger_query(self, sql: str, timeout_s: float | None = None) -> LedgerQueryResponse:
        body = {"sql": sql} if timeout_s is None else {"sql": sql, "timeout_s": timeout_s}
        return LedgerQueryResponse.model_validate_json(self._request("POST", "/v1/ledger/query", body).content)

    def healthy(self) -> bool:
        try:
            return self._http.get("/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    def readiness(self) -> dict[str, Any]:
        return self._http.get("/readyz").json()

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

    def __init__(self, base_url: str = DEFAULT_URL, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout, limits=self.limits)

    async def _request(self, method: str, path: str, json: Any = None) -> httpx.Response:
        for attempt in range(self.max_retries + 1):
            try:
                response = await self._http.request(method, path, json=json)
            except _RETRYABLE_ERRORS as exc:
                if attempt == self.max_retries:
                    raise RewardServerError(None, f"cannot connect: {exc}", self.base_url + path) from exc
                await asyncio.sleep(self._delay_s(attempt, None))
                continue
            except httpx.HTTPError as exc:
                raise RewardServerError(None, f"{type(exc).__name__}: {exc}", self.base_url + path) from exc
            if response.status_code != 503 or attempt == self.max_retries:
                return self._result(response)
            await asyncio.sleep(self._delay_s(attempt, response.headers.get("retry-after")))
        raise AssertionError("unreachable")

    async def verify(self, items: Sequence[VerifyItem | Mapping[str, Any]]) -> list[Verdict]:
        gate = asyncio.Semaphore(self.concurrency)

        async def one(body: dict[str, Any]) -> list[Verdict]:
            async with gate:
                response = await self._request("POST", "/v1/verify", body)
            return VerifyResponse.model_validate_json(response.content).results

        parts = await asyncio.gather(*(one(body) for body in self._batches(items)))
        return [verdict for part in parts for verdict in part]

    async def get_reward(self, query: Sequence[str], labels: Sequence[Any],
                         prompts: Sequence[str] | None = None) -> RewardResponse:
        response = await self._request("POST", "/get_reward", _reward_body(query, labels, prompts))
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
