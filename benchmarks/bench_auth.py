"""What authentication and the many-URL client cost per request: `python benchmarks/bench_auth.py`.

1. Server side: `BearerAuth` around a trivial ASGI app against the bare app, in this process (CPU µs per
   request): a valid token with 1 and with 100 entries in the table, and the 401 path.
2. The client's replica-set bookkeeping per call (`Attempts`: pick, count, release), without HTTP.
3. Client side: client CPU per sequential one-item `verify` against stand-in replicas in a child process
   (so their CPU is not counted): raw `httpx.Client.post` (no replica set, no key, no token) against
   `RewardClient` with one URL and with three.
Rounds alternate the variants; medians of three rounds, `uptime`'s load printed beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support.fake_replica, in the child too

TOKEN = "bench-token-0123456789abcdef"


async def _inner(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def server_side(n: int) -> dict[str, float]:
    from scalerl.env.server.auth import BearerAuth, load_tokens

    folder = Path(tempfile.mkdtemp())
    (folder / "one").write_text(f"score {TOKEN}\n")
    (folder / "many").write_text("".join(f"read other-token-{i:04d}-padding\n" for i in range(99)) + f"score {TOKEN}\n")
    apps = {"bare": _inner,
            "auth, 1 token": BearerAuth(_inner, load_tokens(folder / "one")),
            "auth, 100 tokens": BearerAuth(_inner, load_tokens(folder / "many"))}
    good = [(b"authorization", f"Bearer {TOKEN}".encode()), (b"content-type", b"application/json")]
    scope = {"type": "http", "method": "POST", "path": "/v1/verify", "headers": good}
    anonymous = {**scope, "headers": good[1:]}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        pass

    async def run(app, sc) -> float:
        start = time.process_time()
        for _ in range(n):
            await app(sc, receive, send)
        return (time.process_time() - start) / n * 1e6

    out: dict[str, list[float]] = {}
    for _ in range(3):
        for name, app in apps.items():
            out.setdefault(name, []).append(asyncio.run(run(app, scope)))
        out.setdefault("401 (no token), 1 token", []).append(asyncio.run(run(apps["auth, 1 token"], anonymous)))
    return {k: statistics.median(v) for k, v in out.items()}


def _replicas(ready, stop, count: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.support.fake_replica import FakeReplica

    replicas = [FakeReplica().__enter__() for _ in range(count)]
    ready.put([r.url for r in replicas])
    stop.wait()


def client_side(n: int) -> dict[str, float]:
    import httpx
    from scalerl.env.client import RewardClient

    ctx = multiprocessing.get_context("spawn")
    ready, stop = ctx.Queue(), ctx.Event()
    child = ctx.Process(target=_replicas, args=(ready, stop, 3), daemon=True)
    child.start()
    urls = ready.get(timeout=60)
    body = {"items": [{"id": "a", "domain": "math", "completion": "\\boxed{1}", "answer": "1"}]}
    raw = httpx.Client()
    clients = {"RewardClient, 1 URL": RewardClient(urls[0], token=TOKEN),
               "RewardClient, 3 URLs": RewardClient(urls, token=TOKEN)}

    def timed(call) -> float:
        call()  # connections open before timing
        start = time.process_time()
        for _ in range(n):
            call()
        return (time.process_time() - start) / n * 1e6

    out: dict[str, list[float]] = {}
    try:
        for _ in range(3):
            out.setdefault("raw httpx post", []).append(timed(lambda: raw.post(urls[0] + "/v1/verify", json=body)))
            for name, client in clients.items():
                out.setdefault(name, []).append(timed(lambda c=client: c.verify(body["items"])))
    finally:
        stop.set()
        child.join(10)
    return {k: statistics.median(v) for k, v in out.items()}


def bookkeeping(n: int) -> dict[str, float]:
    """The replica set's own work per call (pick, count, release), without HTTP: CPU µs."""
    import httpx
    from scalerl.env.replicas import Attempts, ReplicaSet

    ok = httpx.Response(200)
    sets = {"1 URL": ReplicaSet(["http://a:1"]), "3 URLs": ReplicaSet(["http://a:1", "http://b:1", "http://c:1"])}

    def run(replicas) -> float:
        start = time.process_time()
        for _ in range(n):
            attempts = Attempts(replicas, safe=True, max_retries=8, delay_s=lambda a, r: 0.0, give_up=RuntimeError)
            replica = attempts.start()
            attempts.finish(replica, "/v1/verify", ok)
        return (time.process_time() - start) / n * 1e6

    out: dict[str, list[float]] = {}
    for _ in range(3):
        for name, replicas in sets.items():
            out.setdefault(name, []).append(run(replicas))
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-requests", type=int, default=20000)
    parser.add_argument("--client-requests", type=int, default=1000)
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()}")
    for title, figures in (("server side, CPU µs per request", server_side(args.server_requests)),
                           ("client replica set alone, CPU µs per call", bookkeeping(args.server_requests)),
                           ("client side, client CPU µs per one-item verify", client_side(args.client_requests))):
        base = next(iter(figures.values()))
        print(title)
        for name, value in figures.items():
            print(f"  {name:28s} {value:8.1f}  ({value - base:+.1f}, x{value / base:.2f})")
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
