"""Owner + replicas with real `scalerl-env serve` processes and a real DuckDB ledger: idempotent
recording (`Idempotency-Key`), forwarding to the owner, the bounded buffer and 503 when the owner is
away, ledger queries through a replica, and the ingest route's answers."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.support.server_harness import ServerProcess, free_port

KEY = "Idempotency-Key"


def items(n: int, tag: str, prompt: str = "p") -> list[dict]:
    return [{"id": f"{tag}{i}", "domain": "math", "completion": f"\\boxed{{{i % 3}}}", "answer": "1",
             "prompt_id": f"{prompt}{i % 4}", "step": 1} for i in range(n)]


def verify(url: str, batch: list[dict], key: str | None, timeout: float = 30.0) -> httpx.Response:
    headers = {KEY: key} if key else {}
    return httpx.post(url + "/v1/verify", json={"items": batch}, headers=headers, timeout=timeout)


def sql(url: str, text: str) -> list[list]:
    response = httpx.post(url + "/v1/ledger/query", json={"sql": text}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["rows"]


def counts(url: str) -> tuple[int, int, int]:
    [row] = sql(url, "SELECT (SELECT count(*) FROM attempts), (SELECT count(*) FROM idempotency), "
                     "(SELECT coalesce(sum(attempts), 0) FROM pass_rates)")
    return tuple(row)


@pytest.fixture
def owner(tmp_path):
    server = ServerProcess("--ledger", str(tmp_path / "ledger.duckdb")).start()
    yield server
    server.stop()


def test_one_process_replay_with_the_same_key_leaves_the_ledger_unchanged(owner):
    first = verify(owner.url, items(6, "a"), "req-1")
    assert first.status_code == 200
    before = sql(owner.url, "SELECT * EXCLUDE (created_at) FROM attempts ORDER BY item_id")
    assert counts(owner.url) == (6, 6, 6)
    again = verify(owner.url, items(6, "a"), "req-1")
    assert again.status_code == 200 and again.json() == first.json()  # the verdicts recorded first
    assert sql(owner.url, "SELECT * EXCLUDE (created_at) FROM attempts ORDER BY item_id") == before
    assert counts(owner.url) == (6, 6, 6)
    verify(owner.url, items(6, "a"), None)  # no key: recorded again, as before keys existed
    assert counts(owner.url) == (12, 6, 12)
    reused = verify(owner.url, items(6, "a", prompt="other"), "req-1")
    assert reused.status_code == 409 and "use a new key" in reused.json()["detail"]
    assert verify(owner.url, items(1, "a"), "k" * 201).json()["detail"][0]["field"] == f"header.{KEY}"


def test_replica_commits_at_the_owner_dedupes_across_replicas_and_proxies_queries(owner, tmp_path):
    replicas = [ServerProcess("--ledger-owner", owner.url).start() for _ in range(2)]
    try:
        a, b = (r.url for r in replicas)
        first = verify(a, items(8, "r"), "req-x")
        assert first.status_code == 200
        assert counts(owner.url) == (8, 8, 8)  # committed at the owner before the answer
        # the same request through the other replica, then to the owner itself: nothing added
        assert verify(b, items(8, "r"), "req-x").json() == first.json()
        assert verify(owner.url, items(8, "r"), "req-x").json() == first.json()
        assert counts(a) == counts(b) == (8, 8, 8)  # ledger queries through replicas reach the owner
        verify(b, items(8, "s"), None)  # no key: the replica makes one up for the link
        assert counts(owner.url) == (16, 16, 16)
        bad = httpx.post(a + "/v1/ledger/query", json={"sql": "DELETE FROM attempts"}, timeout=10)
        assert bad.status_code == 400 and "read" in bad.json()["detail"]  # the owner's answer, passed through
        assert httpx.post(a + "/v1/ledger/ingest", json={"rows": []}).status_code == 409  # a replica owns none
    finally:
        for r in replicas:
            r.stop()


def test_owner_away_buffers_answers_503_then_commits_once_when_it_is_back(tmp_path):
    port = free_port()
    owner_url = f"http://127.0.0.1:{port}"
    replica = ServerProcess("--ledger-owner", owner_url, "--set", "owner.wait_s=1", "--set", "owner.backoff_s=0.05",
                            "--set", "owner.max_backoff_s=0.2", "--set", "owner.max_buffered_rows=12").start()
    owner = ServerProcess("--ledger", str(tmp_path / "ledger.duckdb"))
    try:
        away = verify(replica.url, items(8, "w"), "req-w")
        assert away.status_code == 503 and "stay buffered" in away.json()["detail"]
        assert away.headers["retry-after"] == "1"
        metrics = httpx.get(replica.url + "/metrics").text
        assert "scalerl_owner_buffered_rows 8.0" in metrics
        assert "scalerl_owner_forward_failures_total 0.0" not in metrics  # the link kept trying
        full = verify(replica.url, items(8, "f"), "req-f")  # 8 rows wait, 8 more would pass 12
        assert full.status_code == 503 and "wait for the ledger owner" in full.json()["detail"]
        unrecorded = [{"domain": "math", "completion": "\\boxed{1}", "answer": "1"}]  # no prompt_id
        assert verify(replica.url, unrecorded, None).status_code == 200
        owner.start(port=port)
        deadline = time.monotonic() + 30
        while counts(owner.url)[0] < 8 and time.monotonic() < deadline:  # the buffered rows arrive
            time.sleep(0.2)
        retry = verify(replica.url, items(8, "w"), "req-w")
        assert retry.status_code == 200
        assert counts(owner.url) == (8, 8, 8)  # the buffered first attempt and its retry: once
        statuses = [v["status"] for v in retry.json()["results"]]
        assert statuses == (["wrong", "correct", "wrong"] * 3)[:8]
    finally:
        replica.stop()
        owner.stop()


def test_ingest_route_validates_rows_and_answers_replays(owner):
    row = {"key": "k", "index": 0, "item": {"domain": "math", "prompt_id": "p"},
           "verdict": {"status": "correct", "reward": 1.0}}
    ok = httpx.post(owner.url + "/v1/ledger/ingest", json={"rows": [row, {**row, "index": 1}]})
    assert ok.status_code == 200 and ok.json() == {"recorded": 2, "replayed": []}
    again = httpx.post(owner.url + "/v1/ledger/ingest", json={"rows": [{**row, "index": 1}]}).json()
    assert again["recorded"] == 0 and again["replayed"][0]["row"] == 0
    bad = httpx.post(owner.url + "/v1/ledger/ingest", json={"rows": [{**row, "index": -1}]})
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "rows.0.index"
    assert counts(owner.url) == (2, 2, 2)
