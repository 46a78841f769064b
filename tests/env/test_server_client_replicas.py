"""The client over several replicas: least-in-flight balancing, failover on 503s, refused and dropped
connections and timeouts, set-aside then retry, the counters, and the headers every request carries.

The replicas are `tests.support.fake_replica.FakeReplica`s (real HTTP servers in this process whose
answers a test sets); the last test kills a real `scalerl-env serve` (token-protected) mid-run.
"""

from __future__ import annotations

import asyncio
import signal
import time

import pytest
from scalerl.env.client import TOKEN_ENV, URL_ENV, AsyncRewardClient, RewardClient, RewardServerError
from scalerl.env.replicas import parse_urls

from tests.support.fake_replica import FakeReplica
from tests.support.server_harness import ServerProcess, free_port

TOKEN = "score-token-for-replica-tests"


def items(n: int, tag: str = "x") -> list[dict]:
    return [{"id": f"{tag}{i}", "domain": "math", "completion": "\\boxed{1}", "answer": "1"} for i in range(n)]


def by_url(client) -> dict:
    return {r.url: r for r in client.stats().replicas}


def test_sequential_calls_alternate_between_equal_replicas():
    with FakeReplica() as a, FakeReplica() as b, RewardClient([a.url, b.url]) as client:
        for i in range(10):
            assert [v.id for v in client.verify(items(2, f"c{i}-"))] == [f"c{i}-0", f"c{i}-1"]
        stats = client.stats()
    assert len(a.seen) == len(b.seen) == 5
    assert stats.requests == 10 and stats.retries == stats.failovers == 0
    assert all(r.in_flight == 0 and r.failures == 0 for r in stats.replicas)


def test_least_in_flight_sends_most_work_to_the_fast_replica():
    # Round robin would give each replica 12 of the 24 batches; least in flight keeps the slow one at
    # the few it is holding while the fast one drains the rest.
    async def run(urls):
        async with AsyncRewardClient(urls, batch_size=1, concurrency=4) as client:
            verdicts = await client.verify(items(24))
            return [v.id for v in verdicts], client.stats()

    with FakeReplica(delay_s=1.0) as slow, FakeReplica(delay_s=0.02) as fast:
        ids, stats = asyncio.run(run([slow.url, fast.url]))
    assert ids == [f"x{i}" for i in range(24)]
    assert len(slow.seen) <= 4 and len(fast.seen) >= 20, (len(slow.seen), len(fast.seen))
    assert stats.requests == 24 and stats.retries == 0


def test_503_fails_over_then_sets_aside_then_tries_again():
    with FakeReplica("unavailable") as a, FakeReplica() as b, \
            RewardClient([a.url, b.url], set_aside_after=2, set_aside_s=0.5, backoff_s=0.01) as client:
        for i in range(6):
            assert len(client.verify(items(3, f"r{i}-"))) == 3
        stats, replicas = client.stats(), by_url(client)
        assert replicas[a.url].requests == 2 and replicas[a.url].failures == 2  # then skipped
        assert replicas[a.url].set_aside and replicas[a.url].times_set_aside == 1
        assert replicas[b.url].requests == 6
        assert stats.requests == 6 and stats.retries == stats.failovers == 2 and stats.set_asides == 1

        time.sleep(0.6)  # the set-aside ends: the next requests try the replica again
        a.mode = "ok"
        for i in range(4):
            client.verify(items(1, f"back{i}-"))
        replicas = by_url(client)
        assert replicas[a.url].requests >= 3 and not replicas[a.url].set_aside
        assert replicas[a.url].failures == 2  # the retry succeeded
    assert a.keys()[-1] is not None


def test_timeout_is_retried_on_another_replica_with_the_same_key():
    with FakeReplica(delay_s=3.0) as slow, FakeReplica() as fast, \
            RewardClient([slow.url, fast.url], timeout_s=0.5, backoff_s=0.01) as client:
        for i in range(2):
            assert len(client.verify(items(2, f"t{i}-"))) == 2
        stats = client.stats()
    assert slow.seen, "neither request went to the slow replica first"
    assert set(slow.keys()) <= set(fast.keys())  # each timed-out request arrived again, same key
    assert len(set(fast.keys())) == 2 and None not in fast.keys()  # one key per request
    assert stats.timeouts_retried == len(slow.seen) and stats.failovers == len(slow.seen)


def test_one_replica_timeout_retried_in_place_with_the_same_key():
    with FakeReplica(delay_s=2.0) as only, RewardClient(only.url, timeout_s=0.4, max_retries=2,
                                                          backoff_s=0.01) as client:
        with pytest.raises(RewardServerError, match="ReadTimeout"):
            client.verify(items(1))
        stats = client.stats()
    assert len(only.seen) == 3 and len(set(only.keys())) == 1 and only.keys()[0]
    assert stats.retries == stats.timeouts_retried == 2 and stats.failovers == 0


def test_dropped_connection_is_retried_only_with_keys():
    with FakeReplica("drop") as dead, FakeReplica() as alive:
        with RewardClient([dead.url, alive.url], backoff_s=0.01) as client:
            for i in range(3):
                assert len(client.verify(items(2, f"d{i}-"))) == 2
            assert client.stats().timeouts_retried == len(dead.seen) >= 1
        with RewardClient(dead.url, idempotent=False, max_retries=3) as unkeyed, \
                pytest.raises(RewardServerError, match="RemoteProtocolError"):
            unkeyed.verify(items(1))
        assert dead.keys()[-1] is None and unkeyed.stats().retries == 0


def test_token_and_idempotency_headers(monkeypatch):
    with FakeReplica() as a, FakeReplica() as b:
        monkeypatch.setenv(URL_ENV, f"{a.url}, {b.url}/")
        monkeypatch.setenv(TOKEN_ENV, TOKEN)
        with RewardClient(batch_size=1) as client:  # both from the environment
            assert client.urls == [a.url, b.url]
            client.verify(items(4))
            client.verify(items(2), idempotency_key="run7-step3")
        seen = a.seen + b.seen
        assert {s["auth"] for s in seen} == {f"Bearer {TOKEN}"}
        keys = [s["key"] for s in seen]
        assert len(set(keys)) == 6 and {"run7-step3/0", "run7-step3/1"} <= set(keys)
        with RewardClient(a.url, token="explicit-token-0123456789") as client:
            client.verify(items(1))
        assert a.seen[-1]["auth"] == "Bearer explicit-token-0123456789"


def test_every_replica_refusing_gives_up_after_max_retries():
    urls = [f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"]
    with RewardClient(urls, max_retries=3, backoff_s=0.01) as client:
        with pytest.raises(RewardServerError, match="cannot connect"):
            client.verify(items(1))
        stats = client.stats()
    assert stats.retries == 3 and sum(r.requests for r in stats.replicas) == 4
    assert all(r.failures >= 1 for r in stats.replicas)


def test_url_lists_are_checked():
    assert parse_urls("http://a:1, https://b:2/") == ["http://a:1", "https://b:2"]
    assert parse_urls(["http://a:1,http://b:2", "http://c:3"]) == ["http://a:1", "http://b:2", "http://c:3"]
    for bad in ("", " , ", "a:8000", ["ftp://x"]):
        with pytest.raises(ValueError):
            parse_urls(bad)


def test_a_killed_server_is_failed_over_and_set_aside(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"score {TOKEN}\n")
    a = ServerProcess("--token-file", str(tokens)).start()
    b = ServerProcess("--token-file", str(tokens)).start()
    try:
        with RewardClient([a.url, b.url], token=TOKEN, set_aside_s=60, backoff_s=0.01) as client:
            for i in range(4):
                assert [v.status.value for v in client.verify(items(2, f"k{i}-"))] == ["correct"] * 2
            assert by_url(client)[a.url].requests == 2
            a.stop(signal.SIGKILL)
            for i in range(6):
                assert [v.status.value for v in client.verify(items(2, f"after{i}-"))] == ["correct"] * 2
            replicas, stats = by_url(client), client.stats()
        assert replicas[a.url].set_aside and replicas[a.url].failures == 3 and replicas[a.url].requests == 5
        assert replicas[b.url].requests == 8 and replicas[b.url].failures == 0
        assert stats.failovers == 3 and stats.set_asides == 1
    finally:
        a.stop(signal.SIGKILL)
        b.stop()
