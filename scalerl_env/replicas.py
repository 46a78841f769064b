"""The client's view of several reward-server replicas: which one gets the next request, which failures
move a request to another one, and counters of both (`ReplicaSet`, `Attempts`, `ClientStats`).

Guarantees:
- Least in flight: each request goes to the usable replica with the fewest requests this client has
  outstanding there; ties rotate, so sequential callers spread too.
- Failover: a refused connection, a connect/pool timeout and a 503 are retried on another replica at
  once while one that this request has not tried yet is usable, then with exponential backoff and
  jitter (honouring `Retry-After`). Read timeouts and dropped connections (the request may have been
  scored) are retried only when the request is safe to replay: it carries an idempotency key (the
  server records each (key, item) once) or only reads.
- A replica that fails `set_aside_after` times in a row is set aside for `set_aside_s`, then tried
  again by the next request that picks it; one success clears its failures. When every replica is set
  aside, the one due back first is tried rather than failing without a request.
- Thread-safe (one lock, short sections), so one set serves a client's threads or its event loop.

Not guaranteed: balancing across processes (each client counts only its own requests), or that an
unsafe request which timed out was not scored.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable, Sequence

import httpx
from pydantic import Field
from scalerl.env.contracts.records import Strict

# Never reached the server: safe to send again anywhere.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# May have been received and scored: safe to send again only with an idempotency key.
MAYBE_SENT = (httpx.ReadTimeout, httpx.WriteTimeout, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


class ReplicaStats(Strict):
    url: str
    requests: int = Field(description="requests sent to this replica (retries included)")
    failures: int = Field(description="requests that failed here: refused, timed out, dropped or 503")
    in_flight: int = Field(description="requests of this client outstanding here now")
    set_aside: bool = Field(description="set aside now (skipped until set_aside_s has passed)")
    times_set_aside: int


class ClientStats(Strict):
    requests: int = Field(description="calls made (each counted once, however many times it was sent)")
    retries: int = Field(description="re-sends after a failure, to any replica")
    failovers: int = Field(description="re-sends that went to a different replica than the failed one")
    timeouts_retried: int = Field(description="re-sends after a read/write timeout or a dropped connection")
    set_asides: int = Field(description="times a replica was set aside")
    replicas: list[ReplicaStats]


def parse_urls(urls: str | Sequence[str]) -> list[str]:
    """`"http://a:8000,http://b:8000"` or a list of URLs → the URLs, without trailing slashes."""
    parts = urls.split(",") if isinstance(urls, str) else [p for u in urls for p in str(u).split(",")]
    out = [p.strip().rstrip("/") for p in parts if p.strip()]
    if not out:
        raise ValueError("no reward server URL given")
    for url in out:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"reward server URL {url!r} must start with http:// or https://")
    return out


class _Replica:
    __slots__ = ("url", "requests", "failures", "streak", "in_flight", "until", "times_set_aside")

    def __init__(self, url: str) -> None:
        self.url = url
        self.requests = self.failures = self.streak = self.in_flight = self.times_set_aside = 0
        self.until = 0.0  # monotonic time the set-aside ends; 0: usable


class ReplicaSet:
    def __init__(self, urls: Sequence[str], *, set_aside_after: int = 3, set_aside_s: float = 30.0) -> None:
        if set_aside_after < 1 or set_aside_s < 0:
            raise ValueError("set_aside_after must be >= 1 and set_aside_s >= 0")
        self.replicas = [_Replica(url) for url in urls]
        self.set_aside_after = set_aside_after
        self.set_aside_s = set_aside_s
        self.lock = threading.Lock()
        self.cursor = 0
        self.counts = {"requests": 0, "retries": 0, "failovers": 0, "timeouts_retried": 0, "set_asides": 0}

    def acquire(self, avoid: set[str]) -> _Replica:
        """The replica for the next send: least in flight among the usable ones not in `avoid`."""
        with self.lock:
            now = time.monotonic()
            usable = [r for r in self.replicas if r.until <= now]
            choice = [r for r in usable if r.url not in avoid] or usable
            n, start = len(self.replicas), self.cursor
            self.cursor += 1
            if choice:
                rank = {id(r): i for i, r in enumerate(self.replicas)}
                pick = min(choice, key=lambda r: (r.in_flight, (rank[id(r)] - start) % n))
            else:
                pick = min(self.replicas, key=lambda r: r.until)  # all set aside: the one due back first
            pick.in_flight += 1
            pick.requests += 1
            return pick

    def release(self, replica: _Replica, ok: bool) -> None:
        with self.lock:
            replica.in_flight -= 1
            if ok:
                replica.streak = 0
                return
            replica.failures += 1
            replica.streak += 1
            now = time.monotonic()
            if replica.streak >= self.set_aside_after and replica.until <= now:
                replica.until = now + self.set_aside_s
                replica.times_set_aside += 1
                self.counts["set_asides"] += 1

    def untried_usable(self, tried: set[str]) -> bool:
        with self.lock:
            now = time.monotonic()
            return any(r.until <= now and r.url not in tried for r in self.replicas)

    def count(self, name: str) -> None:
        with self.lock:
            self.counts[name] += 1

    def stats(self) -> ClientStats:
        with self.lock:
            now = time.monotonic()
            replicas = [ReplicaStats(url=r.url, requests=r.requests, failures=r.failures, in_flight=r.in_flight,
                                     set_aside=r.until > now, times_set_aside=r.times_set_aside)
                        for r in self.replicas]
            return ClientStats(**self.counts, replicas=replicas)


class Attempts:
    """One call's sends: `start()` picks a replica, `finish()` says what its outcome means: the
    response to return, a delay before the next send, or (raised) the error to give up with."""

    def __init__(self, replicas: ReplicaSet, *, safe: bool, max_retries: int,
                 delay_s: Callable[[int, str | None], float],
                 give_up: Callable[[int | None, str, str], Exception]) -> None:
        self.replicas = replicas
        self.safe = safe
        self.max_retries = max_retries
        self.delay_s = delay_s  # (attempt, retry_after) -> seconds
        self.give_up = give_up  # (status, detail, url) -> exception
        self.sent = 0
        self.backoffs = 0
        self.tried: set[str] = set()
        self.failed: str | None = None
        replicas.count("requests")

    def start(self) -> _Replica:
        replica = self.replicas.acquire(self.tried)
        if self.sent:
            self.replicas.count("retries")
            if replica.url != self.failed:
                self.replicas.count("failovers")
        self.sent += 1
        self.tried.add(replica.url)
        return replica

    def finish(self, replica: _Replica, path: str, outcome: httpx.Response | Exception) -> httpx.Response | float:
        url = replica.url + path
        if isinstance(outcome, httpx.Response):
            retry = outcome.status_code == 503
            self.replicas.release(replica, ok=not retry)
            if not retry or self.sent > self.max_retries:
                return outcome
            return self._next(replica, outcome.headers.get("retry-after"))
        self.replicas.release(replica, ok=False)
        if _tls_failure(outcome):
            raise self.give_up(None, f"TLS: {outcome}", url) from outcome
        replayable = isinstance(outcome, NOT_SENT) or (self.safe and isinstance(outcome, MAYBE_SENT))
        if not replayable or self.sent > self.max_retries:
            what = "cannot connect" if isinstance(outcome, NOT_SENT) else type(outcome).__name__
            raise self.give_up(None, f"{what}: {outcome}", url) from outcome
        if isinstance(outcome, MAYBE_SENT):
            self.replicas.count("timeouts_retried")
        return self._next(replica, None)

    def _next(self, replica: _Replica, retry_after: str | None) -> float:
        """No wait while another replica is untried; once all were, back off and try them all again."""
        self.failed = replica.url
        if self.replicas.untried_usable(self.tried):
            return 0.0
        self.tried = {replica.url} if len(self.replicas.replicas) > 1 else set()
        self.backoffs += 1
        return self.delay_s(self.backoffs - 1, retry_after)


def _tls_failure(exc: BaseException) -> bool:
    """A certificate or handshake failure: retrying cannot help."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
