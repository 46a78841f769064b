"""A stand-in reward-server replica for the client's balancing and failover tests: a real HTTP server
(stdlib, in this process, own thread) whose behaviour a test sets and whose requests it records.

Modes: `ok` (a `correct` verdict per item, after `delay_s`), `unavailable` (503 + Retry-After: 0),
`drop` (reads the request, closes the connection without answering: a replica killed mid-request).
What it records per request: path, `Idempotency-Key`, `Authorization`, and how many requests it held
at once (`max_concurrent`). It never scores anything: the server side is tested elsewhere.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeReplica:
    def __init__(self, mode: str = "ok", delay_s: float = 0.0) -> None:
        self.mode = mode
        self.delay_s = delay_s
        self.seen: list[dict[str, str | None]] = []
        self.lock = threading.Lock()
        self.concurrent = self.max_concurrent = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def keys(self) -> list[str | None]:
        with self.lock:
            return [s["key"] for s in self.seen]

    def __enter__(self) -> FakeReplica:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(replica: FakeReplica) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
            with replica.lock:
                replica.seen.append({"path": self.path, "key": self.headers.get("idempotency-key"),
                                     "auth": self.headers.get("authorization")})
                replica.concurrent += 1
                replica.max_concurrent = max(replica.max_concurrent, replica.concurrent)
            try:
                self._answer(body)
            finally:
                with replica.lock:
                    replica.concurrent -= 1

        def _answer(self, body: dict) -> None:
            mode, delay = replica.mode, replica.delay_s
            if mode == "drop":
                self.close_connection = True
                self.connection.close()
                return
            if mode == "unavailable":
                self._send(503, {"detail": "overloaded"}, {"Retry-After": "0"})
                return
            time.sleep(delay)
            results = [{"status": "correct", "reward": 1.0, "id": item.get("id")} for item in body.get("items", [])]
            self._send(200, {"results": results})

        def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except OSError:  # the client gave up (its timeout): nothing to answer
                pass

    return Handler
