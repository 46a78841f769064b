"""SIGTERM during load: in-flight requests are answered, every acknowledged verdict is in the ledger
after a restart, and the process exits 0. Start-up freezes its objects out of the cyclic collector."""

from __future__ import annotations

import asyncio
import signal
import time

import httpx
from scalerl.env.client import RewardClient

from tests.support.server_harness import ServerProcess, alive, descendants

SUM_TESTS = {"kind": "stdio", "cases": [{"input": "", "output": "5\n"}]}
SLEEPY = "```python\nimport time\ntime.sleep(0.4)\nprint(5)\n```"


def batch(client_id: int, n: int) -> list[dict]:
    items = []
    for k in range(4):
        pid = f"sig-{client_id}-{n}-{k}"
        if k == 0:
            items.append({"id": pid, "domain": "code", "completion": SLEEPY, "tests": SUM_TESTS, "prompt_id": pid})
        else:
            items.append({"id": pid, "domain": "math", "completion": f"\\boxed{{{k}}}", "answer": str(k),
                          "prompt_id": pid, "step": n, "sample_index": k})
    return items


async def load(url: str, clients: int, stop: dict, outcomes: list) -> None:
    async def one(c: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            n = 0
            while time.monotonic() < stop["at"]:
                items = batch(c, n)
                n += 1
                sent = time.monotonic()
                try:
                    response = await http.post("/v1/verify", json={"items": items})
                except httpx.HTTPError as exc:
                    outcomes.append(("error", sent, type(exc).__name__, items))
                    await asyncio.sleep(0.05)
                    continue
                outcomes.append((response.status_code, sent, time.monotonic(), items))

    await asyncio.gather(*(one(c) for c in range(clients)))


def test_sigterm_during_load_drains_and_keeps_every_acknowledged_verdict(tmp_path):
    ledger = tmp_path / "ledger.duckdb"
    server = ServerProcess("--ledger", str(ledger), "--set", "drain_timeout_s=30").start()
    outcomes: list = []
    children: set[int] = set()
    try:
        with RewardClient(server.url) as client:  # warm the code sandbox so load starts at full speed
            assert client.verify([{"domain": "code", "completion": SLEEPY, "tests": SUM_TESTS}])[0].correct

        async def scenario() -> float:
            stop = {"at": time.monotonic() + 60.0}
            task = asyncio.create_task(load(server.url, 8, stop, outcomes))
            while sum(o[0] == 200 for o in outcomes) < 8:  # load is flowing; others are in flight now
                assert time.monotonic() < stop["at"] and not task.done(), "no load got through"
                await asyncio.sleep(0.05)
            children.update(descendants(server.proc.pid))
            server.proc.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            stop["at"] = signalled + 3.0
            await task
            return signalled

        signalled = asyncio.run(scenario())
        returncode = server.proc.wait(timeout=60)
    finally:
        server.stop()
    log = server.log()
    assert returncode == 0, log[-3000:]
    assert len(children) >= 2, "math workers and the sandbox were running"
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in children if alive(pid)], "workers and sandboxes are gone after exit"
    acked = [o for o in outcomes if o[0] == 200]
    assert len([o for o in acked if o[2] < signalled]) >= 8, "load was running before the signal"
    answered_after_signal = [o for o in acked if o[2] > signalled]
    assert answered_after_signal, "requests in flight at SIGTERM were answered (drained)"
    assert {o[0] for o in outcomes} <= {200, 503, "error"}, {o[0] for o in outcomes}
    acked_ids = {it["prompt_id"] for o in acked for it in o[3]}
    sent_ids = {it["prompt_id"] for o in outcomes for it in o[3]}

    restarted = ServerProcess("--ledger", str(ledger)).start()
    try:
        with RewardClient(restarted.url) as client:
            rows = client.ledger_query("SELECT prompt_id FROM attempts WHERE prompt_id LIKE 'sig-%'").rows
    finally:
        assert restarted.stop() == 0
    recorded = [r[0] for r in rows]
    assert acked_ids <= set(recorded), f"{len(acked_ids - set(recorded))} acknowledged verdicts missing"
    assert set(recorded) <= sent_ids
    assert len(recorded) == len(set(recorded)), "no verdict recorded twice"
    assert "reward server stopped" in log


def test_a_started_server_freezes_its_start_up_objects_out_of_the_collector():
    """`lifecycle._Server` freezes what start-up built (gc.freeze) before it serves: the cyclic collector's
    full collections no longer rescan those objects."""
    import gc
    import types

    import uvicorn
    from scalerl.env.server.lifecycle import _Server

    from tests.support.server_harness import free_port

    async def app(scope, receive, send) -> None:  # a lifespan-only ASGI app: start-up is what is tested
        while scope["type"] == "lifespan":
            kind = (await receive())["type"]
            await send({"type": f"{kind}.complete"})
            if kind == "lifespan.shutdown":
                return

    async def serve() -> int:
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        frozen = gc.get_freeze_count()
        server.should_exit = True
        await task
        return frozen

    config = uvicorn.Config(app, port=free_port(), log_config=None, lifespan="on")
    server = _Server(config, types.SimpleNamespace(draining=False))
    gc.unfreeze()
    try:
        assert asyncio.run(serve()) > 1000
    finally:
        gc.unfreeze()  # this test process goes on collecting as before
