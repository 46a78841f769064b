"""Admission control: body size and encoding at the door, a bound on items in flight inside.

Guarantees:
- A body larger than `max_body_bytes` is answered 413 without being held in memory beyond the limit
  (a `Content-Length` over it is refused before a byte is read; chunked bodies are counted as they come).
- A body that is not valid UTF-8 is answered 400 naming the byte offset; it never reaches the JSON parser.
- `InFlight` admits a batch only if all its items fit under the limit (no partial admission), so the
  number of items being scored never exceeds it. The caller gets 503 with `Retry-After` instead of a queue.

Not guaranteed: fairness between clients (first come, first admitted; a refused client retries).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_TOO_LARGE = b"<too large>"  # identity-compared sentinel returned by read_body


class InFlight:
    """Counts admitted items. Used from the event loop only, so no lock is needed."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    def try_acquire(self, n: int) -> bool:
        if self.count + n > self.limit:
            return False
        self.count += n
        return True

    def release(self, n: int) -> None:
        self.count = max(0, self.count - n)


class BodyGuard:
    """Pure ASGI middleware: reads the whole body under a size cap, checks UTF-8, then replays it."""

    def __init__(
        self, app: ASGIApp, max_body_bytes: int, on_reject: Callable[[str], None] | None = None
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.on_reject = on_reject or (lambda reason: None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared == -1:
            await self._reject(scope, receive, send, 400, "bad_request", "Content-Length is not a number")
            return
        if declared is not None and declared > self.max_body_bytes:
            await self._reject(scope, receive, send, 413, "too_large", self._too_large())
            return
        body = await read_body(receive, self.max_body_bytes)
        if body is None:  # the client went away mid-body: nobody to answer
            return
        if body is _TOO_LARGE:
            await self._reject(scope, receive, send, 413, "too_large", self._too_large())
            return
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            await self._reject(scope, receive, send, 400, "bad_encoding",
                               f"request body is not valid UTF-8 (byte {exc.start})")
            return
        await self.app(scope, replay(body, receive), send)

    def _too_large(self) -> str:
        return f"request body exceeds {self.max_body_bytes} bytes (limits.max_body_bytes)"

    async def _reject(self, scope: Scope, receive: Receive, send: Send, status: int, reason: str,
                      detail: str) -> None:
        self.on_reject(reason)
        response = JSONResponse({"detail": detail}, status_code=status, headers={"Connection": "close"})
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    """The declared length, None when absent, -1 when unparsable."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return -1
    return None


async def read_body(receive: Receive, max_bytes: int | None = None) -> bytes | None:
    """The whole request body; None when the client went away first; `_TOO_LARGE` (without reading further)
    past `max_bytes`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if max_bytes is not None and size > max_bytes:
            return _TOO_LARGE
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Callable[[], Awaitable[Message]]:
    """A `receive` that yields `body` as one message, then defers to the original (disconnects)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
