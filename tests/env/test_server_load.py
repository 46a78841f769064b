"""Reward server under load: many concurrent clients, overload, deadlines; a real server process each."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from scalerl.env.client import AsyncRewardClient, RewardClient
from scalerl.env.contracts.records import Status

from tests.support.server_harness import OVERLOAD, shared_server

SUM_TESTS = {"kind": "stdio", "cases": [{"input": "2 3\n", "output": "5\n"}]}
GOOD_CODE = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
BAD_CODE = "```python\nprint(4)\n```"


def sleepy_code(seconds: float) -> dict:
    program = f"```python\nimport time\ntime.sleep({seconds})\nprint(5)\n```"
    return {"domain": "code", "completion": program, "tests": SUM_TESTS, "limits": {"time_s": 5}}


def mixed_batch(client_id: int, batch_id: int) -> tuple[list[dict], list[Status]]:
    """8 items, math and code interleaved, with a known verdict for each."""
    items, expected = [], []
    for k in range(8):
        n = client_id * 100 + batch_id * 10 + k
        if k % 4 == 3:
            good = (client_id + k) % 2 == 0
            items.append({"domain": "code", "completion": GOOD_CODE if good else BAD_CODE, "tests": SUM_TESTS})
            expected.append(Status.correct if good else Status.wrong)
        else:
            said = n if k % 3 else n + 1
            items.append({"domain": "math", "completion": f"so \\boxed{{{said}}}", "answer": str(n)})
            expected.append(Status.correct if said == n else Status.wrong)
        items[-1]["id"] = f"{client_id}-{batch_id}-{k}"
    return items, expected


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    ledger = tmp_path_factory.mktemp("ledger") / "ledger.duckdb"
    return shared_server(request, "main", "--ledger", str(ledger))


@pytest.fixture(scope="module")
def overloaded(request):
    return shared_server(request, "overload", *OVERLOAD)


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def _one_client(url: str, client_id: int, batches: int) -> list[str]:
    """Returns mismatch descriptions (empty when every verdict is right and in order)."""
    problems = []
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        for b in range(batches):
            items, expected = mixed_batch(client_id, b)
            response = await http.post("/v1/verify", json={"items": items})
            if response.status_code != 200:
                problems.append(f"{client_id}/{b}: HTTP {response.status_code} {response.text[:200]}")
                continue
            results = response.json()["results"]
            got = [(r["id"], r["status"]) for r in results]
            want = [(it["id"], st.value) for it, st in zip(items, expected)]
            if got != want:
                problems.append(f"{client_id}/{b}: {got} != {want}")
    return problems


def test_64_concurrent_clients_mixed_batches_all_correct_and_in_order(server):
    async def round_of(clients: int, batches: int) -> list[str]:
        results = await asyncio.gather(*(_one_client(server.url, c, batches) for c in range(clients)))
        return [p for r in results for p in r]

    assert asyncio.run(round_of(64, 1)) == []
    after_first = rss_mb(server.proc.pid)
    assert asyncio.run(round_of(64, 2)) == []
    after_second = rss_mb(server.proc.pid)
    # Memory is bounded: twice the work after warm-up must not grow the server by more than a little.
    assert after_second - after_first < 64, (after_first, after_second)
    assert server.proc.poll() is None


def test_overload_yields_503_with_retry_after_never_a_lost_response(overloaded):
    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=overloaded.url, timeout=60,
                                     limits=httpx.Limits(max_connections=64)) as http:
            batch = {"items": [sleepy_code(0.3) for _ in range(4)]}
            return await asyncio.gather(*(http.post("/v1/verify", json=batch) for _ in range(24)))

    responses = asyncio.run(burst())
    codes = [r.status_code for r in responses]
    assert len(responses) == 24 and set(codes) <= {200, 503}, codes
    assert codes.count(503) >= 10, codes  # 8 items in flight = at most two 4-item batches at once
    assert codes.count(200) >= 2, codes
    for r in responses:
        if r.status_code == 503:
            assert int(r.headers["retry-after"]) >= 1
        else:
            assert [v["status"] for v in r.json()["results"]] == ["correct"] * 4
    assert httpx.get(overloaded.url + "/healthz").status_code == 200


def test_client_retries_503_until_served(overloaded):
    async def run() -> list[list]:
        async def one(i: int):
            async with AsyncRewardClient(overloaded.url, max_retries=30, backoff_s=0.05, max_backoff_s=0.5) as c:
                return await c.verify([sleepy_code(0.1) for _ in range(4)])

        return await asyncio.gather(*(one(i) for i in range(12)))

    results = asyncio.run(run())
    assert all([v.status for v in r] == [Status.correct] * 4 for r in results)
    assert _rejected(overloaded.url, "overloaded") > 0


def test_deadline_is_504_and_items_stay_counted_until_done(overloaded):
    with RewardClient(overloaded.url, max_retries=20, backoff_s=0.1, max_backoff_s=0.5) as client:
        start = time.monotonic()
        response = httpx.post(overloaded.url + "/v1/verify", json={"items": [sleepy_code(4.5)]}, timeout=60)
        assert response.status_code == 504
        assert time.monotonic() - start < 4.4
        assert _gauge(overloaded.url, "scalerl_items_in_flight") >= 1
        time.sleep(3.0)
        assert _gauge(overloaded.url, "scalerl_items_in_flight") == 0
        assert client.verify([{"domain": "math", "completion": "\\boxed{1}", "answer": "1"}])[0].correct


def _metric_lines(url: str) -> list[str]:
    return httpx.get(url + "/metrics").text.splitlines()


def _gauge(url: str, name: str) -> float:
    return next(float(line.split()[-1]) for line in _metric_lines(url) if line.startswith(name + " "))


def _rejected(url: str, reason: str) -> float:
    series = f'scalerl_requests_rejected_total{{reason="{reason}"}}'
    return next((float(line.split()[-1]) for line in _metric_lines(url) if line.startswith(series)), 0.0)


def test_client_without_idempotency_keys_does_not_retry_a_timeout(overloaded):
    from scalerl.env.client import RewardServerError

    with RewardClient(overloaded.url, timeout_s=0.5, max_retries=5, idempotent=False) as client:
        start = time.monotonic()
        with pytest.raises(RewardServerError) as info:
            client.verify([sleepy_code(1.5)])
        assert info.value.status is None and "Timeout" in str(info.value)
        assert time.monotonic() - start < 1.4  # one attempt, no retries of a request that may be scored
    time.sleep(1.5)  # let the item finish so the next test sees an idle server


def test_client_retries_refused_connections_then_gives_up():
    from scalerl.env.client import RewardServerError

    from tests.support.server_harness import free_port

    with RewardClient(f"http://127.0.0.1:{free_port()}", max_retries=2, backoff_s=0.01) as client, \
            pytest.raises(RewardServerError, match="cannot connect"):
        client.verify([{"domain": "math", "completion": "\\boxed{1}", "answer": "1"}])
