"""The Ray deployment of docs/server.md (`examples/ray_reward_replicas.py`) on a local Ray cluster:
an owner actor and a replica actor, a keyed request sent twice through the replica, recorded once."""

from __future__ import annotations

import sys

import httpx
import pytest
from scalerl.env.contracts.paths import REPO

from tests.env.rl_support import require

pytestmark = [pytest.mark.rl, pytest.mark.ray, pytest.mark.timeout(600)]


def test_owner_and_replica_as_ray_actors_record_a_replayed_request_once(tmp_path):
    require("ray")
    import ray

    sys.path.insert(0, str(REPO / "examples"))
    from ray_reward_replicas import start_reward_service, stop_reward_service

    ray.init(num_cpus=3, include_dashboard=False)
    try:
        owner, actors, urls = start_reward_service(1, 1, str(tmp_path / "ledger.duckdb"), insecure=True)
        item = {"id": "a", "domain": "math", "completion": "\\boxed{2}", "answer": "2", "prompt_id": "p"}
        answers = [httpx.post(urls[0] + "/v1/verify", json={"items": [item]}, headers={"Idempotency-Key": "k"},
                              timeout=60).json() for _ in range(2)]
        assert answers[0] == answers[1] and answers[0]["results"][0]["status"] == "correct"
        rows = httpx.post(urls[0] + "/v1/ledger/query", json={"sql": "SELECT count(*) FROM attempts"}).json()["rows"]
        assert rows == [[1]]
        stop_reward_service(owner, actors)
    finally:
        ray.shutdown()
        sys.path.remove(str(REPO / "examples"))
