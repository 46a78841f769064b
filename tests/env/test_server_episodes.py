"""Multi-turn episodes over real HTTP (`scalerl-env serve` in a child process), with a test-double environment
installed as a plug-in (`tests/support/episode_plugin.py`): create/step/close, retried steps applied once,
the idle timeout, the open-episode bound, tokens and scopes, bad bodies, the ledger's row of an episode."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time

import httpx
import pytest
from scalerl.env.client import RewardServerError
from scalerl.env.episode_client import AsyncEpisodeClient, EpisodeClient

from tests.support.episode_plugin import install_echo_environment
from tests.support.server_harness import REPO, ServerProcess

SCORE = "episode-score-token-0123456789"
READ = "episode-read-token-0123456789"
EPISODE_ROUTES = {"/v1/episodes": ["post"], "/v1/episodes/{episode_id}/step": ["post"],
                  "/v1/episodes/{episode_id}": ["delete", "get"]}
PROBLEM = {"prompt_id": "p-echo-1", "domain": "math", "source": "test", "answer": "4",
           "prompt": [{"role": "user", "content": "What is 2 + 2?"}]}


def start(tmp_path_factory, *args: str, ledger: bool = True) -> tuple[ServerProcess, object]:
    """A server with tokens that has the `echo` environment installed, with a ledger of its own unless told
    otherwise; its close log (one prompt id per closed episode)."""
    folder = tmp_path_factory.mktemp("episodes")
    (folder / "plugin").mkdir()
    plugin = install_echo_environment(folder / "plugin")
    (folder / "tokens").write_text(f"score {SCORE}\nread {READ}\n")
    closed = folder / "closed.log"
    env = {"PYTHONPATH": os.pathsep.join([str(plugin), str(REPO)]), "ECHO_CLOSED_LOG": str(closed)}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        own = ("--ledger", str(folder / "ledger.duckdb")) if ledger else ()
        server = ServerProcess(*own, "--token-file", str(folder / "tokens"), *args).start()
    return server, closed


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    server, closed = start(tmp_path_factory, "--set", "episodes.max_open=3")
    yield server, closed
    server.stop()


@pytest.fixture(scope="module")
def server(served):
    return served[0]


@pytest.fixture
def client(server):
    with EpisodeClient(server.url, token=SCORE, timeout_s=60) as c:
        yield c


def call(server, method: str, path: str, token: str | None = SCORE, **kwargs) -> httpx.Response:
    headers = kwargs.pop("headers", None) or ({"Authorization": f"Bearer {token}"} if token else {})
    return httpx.request(method, server.url + path, headers=headers, timeout=60, **kwargs)


def problem(prompt_id: str, answer: str = "4") -> dict:
    return {**PROBLEM, "prompt_id": prompt_id, "answer": answer}


def test_the_openapi_document_types_every_episode_operation():
    paths = json.loads((REPO / "openapi.json").read_text())["paths"]
    for path, methods in EPISODE_ROUTES.items():
        assert sorted(paths[path]) == methods
        for method in methods:
            operation = paths[path][method]
            assert "$ref" in operation["responses"]["200"]["content"]["application/json"]["schema"], (path, method)
            assert {"404", "422"} <= set(operation["responses"]), (path, method)
            needed = "read" if method == "get" else "score"
            assert operation["security"] == [{"bearerAuth": [needed]}], (path, method)


def test_create_step_read_close(client):
    created = client.create("echo", problem("p-flow"), limits={"max_turns": 3})
    assert created.environment == "echo" and len(created.episode_id) >= 32
    assert created.limits.max_turns == 3 and created.limits.max_observation_chars == 2_000  # only the field given
    assert created.step.turn == 0 and created.step.observation[0].content == "What is 2 + 2?"
    first = client.step(created.episode_id, "tool:print(2+2)", 0)
    assert (first.done, first.turn, first.observation[0].content) == (False, 1, "call 1: tool:print(2+2)")
    last = client.step(created.episode_id, "answer:4", 1)
    assert (last.done, last.reward, last.verdict.status.value, last.turn) == (True, 1.0, "correct", 2)
    state = client.state(created.episode_id)
    assert [m.role for m in state.messages] == ["user", "assistant", "tool", "assistant"]
    assert (state.turn, state.done, state.reward) == (2, True, 1.0)
    closed = client.close_episode(created.episode_id)
    assert (closed.turn, closed.done) == (2, True)
    assert client.close_episode(created.episode_id) == closed  # a repeated close answers the same
    with pytest.raises(RewardServerError) as gone:
        client.step(created.episode_id, "answer:4", 2)
    assert gone.value.status == 410 and "closed by DELETE" in gone.value.detail


def test_remote_episode_is_the_contracts_episode(client):
    episode = client.episode("echo", problem("p-remote"))
    step = episode.reset()
    for action in ("tool:a", "tool:b", "answer:5"):
        step = episode.step(action)
    assert (step.done, step.reward, step.info["tool_calls"]) == (True, 0.0, 2)
    episode.close()
    episode.close()


def test_the_async_client_runs_an_episode(server):
    async def run() -> tuple:
        async with AsyncEpisodeClient(server.url, token=SCORE, timeout_s=60) as client:
            created = await client.create("echo", problem("p-async"))
            step = await client.step(created.episode_id, "answer:4", 0)
            state = await client.state(created.episode_id)
            return step, state, await client.close_episode(created.episode_id)

    step, state, closed = asyncio.run(run())
    assert (step.done, step.reward, state.turn, closed.done) == (True, 1.0, 1, True)


def test_an_episode_client_takes_one_url():
    with pytest.raises(ValueError, match="one server URL"):
        EpisodeClient("http://127.0.0.1:1,http://127.0.0.1:2")


def test_a_step_sent_twice_is_applied_once(server, client):
    created = client.create("echo", problem("p-twice"))
    body = {"action": "tool:x", "turn": 0}
    path = f"/v1/episodes/{created.episode_id}/step"
    first, again = call(server, "POST", path, json=body), call(server, "POST", path, json=body)
    assert first.status_code == again.status_code == 200 and first.json() == again.json()
    other = call(server, "POST", path, json={"action": "tool:y", "turn": 0})
    assert other.status_code == 409 and "another action" in other.json()["detail"]
    ahead = call(server, "POST", path, json={"action": "tool:y", "turn": 5})
    assert ahead.status_code == 409 and "next turn is 1" in ahead.json()["detail"]
    nxt = client.step(created.episode_id, "tool:z", 1)
    assert nxt.observation[0].content == "call 2: tool:z"  # the environment saw two actions, not three
    client.close_episode(created.episode_id)


def test_concurrent_copies_of_a_step_are_applied_once(server, client):
    created = client.create("echo", problem("p-race"))
    path = f"/v1/episodes/{created.episode_id}/step"
    answers: list[httpx.Response] = []
    sends = [threading.Thread(target=lambda: answers.append(
        call(server, "POST", path, json={"action": "sleep:0.5", "turn": 0}))) for _ in range(3)]
    for send in sends:
        send.start()
    for send in sends:
        send.join()
    assert [a.status_code for a in answers] == [200] * 3 and len({a.text for a in answers}) == 1
    assert client.step(created.episode_id, "tool:next", 1).observation[0].content == "call 2: tool:next"
    client.close_episode(created.episode_id)


def test_a_step_whose_answer_was_lost_is_retried_and_applied_once(server):
    """The client gives up waiting (timeout) while the environment works; its re-sends of the same turn wait
    for the first and get its result."""
    with EpisodeClient(server.url, token=SCORE, timeout_s=0.4, backoff_s=0.2, max_retries=20) as slow:
        created = slow.create("echo", problem("p-lost"))
        step = slow.step(created.episode_id, "sleep:1.5", 0)
        assert step.observation[0].content == "call 1: sleep:1.5"
        assert slow.stats().timeouts_retried >= 1
        assert slow.state(created.episode_id).turn == 1
        assert slow.step(created.episode_id, "tool:after", 1).observation[0].content == "call 2: tool:after"
        slow.close_episode(created.episode_id)


def test_a_create_retried_with_its_key_gets_the_same_episode(client):
    one = client.create("echo", problem("p-key"), idempotency_key="create-key-1")
    two = client.create("echo", problem("p-key"), idempotency_key="create-key-1")
    assert one.episode_id == two.episode_id
    with pytest.raises(RewardServerError) as conflict:
        client.create("echo", problem("p-other"), idempotency_key="create-key-1")
    assert conflict.value.status == 409
    client.close_episode(one.episode_id)


def test_open_episodes_are_bounded(server, client):
    ids = [client.create("echo", problem(f"p-bound-{i}")).episode_id for i in range(3)]
    refused = call(server, "POST", "/v1/episodes", json={"environment": "echo", "problem": problem("p-bound-3")})
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
    assert "episodes.max_open=3" in refused.json()["detail"]
    client.close_episode(ids[0])
    ids[0] = client.create("echo", problem("p-bound-3")).episode_id
    for episode_id in ids:
        client.close_episode(episode_id)


def test_unknown_environment_lists_the_installed_ones(server):
    answer = call(server, "POST", "/v1/episodes", json={"environment": "nope", "problem": PROBLEM})
    assert answer.status_code == 404 and "'nope'" in answer.json()["detail"] and "echo" in answer.json()["detail"]


@pytest.mark.parametrize(("body", "field"), [
    ({"environment": "echo"}, "problem"),
    ({"environment": "echo", "problem": PROBLEM, "limits": {"max_turns": 0}}, "limits.max_turns"),
    ({"environment": "echo", "problem": PROBLEM, "limits": {"max_turns": 2, "turns": 3}}, "limits.turns"),
    ({"environment": "echo", "problem": {**PROBLEM, "domain": "code", "answer": None,
                                         "tests": {"kind": "stdio", "cases": [{"output": "1"}]}}}, "problem.domain"),
])
def test_malformed_create_bodies_name_the_field(server, body, field):
    answer = call(server, "POST", "/v1/episodes", json=body)
    assert answer.status_code == 422, answer.text
    assert field in [d["field"] for d in answer.json()["detail"]]


def test_malformed_step_bodies_name_the_field(server, client):
    created = client.create("echo", problem("p-bad-step"))
    path = f"/v1/episodes/{created.episode_id}/step"
    for body, field in (('{"action": "x"}', "turn"), ('{"action": "x", "turn": -1}', "turn"),
                        ('{"turn": 0}', "action"), ('{"action": "\\ud800", "turn": 0}', "action")):
        answer = call(server, "POST", path, content=body, headers={"Authorization": f"Bearer {SCORE}",
                                                                    "Content-Type": "application/json"})
        assert answer.status_code == 422 and field in [d["field"] for d in answer.json()["detail"]], answer.text
    assert call(server, "POST", "/v1/episodes/no-such-id/step", json={"action": "x", "turn": 0}).status_code == 404
    client.close_episode(created.episode_id)


def test_a_problem_the_environment_refuses_is_422_and_a_failing_environment_closes_its_episode(server, client):
    refused = call(server, "POST", "/v1/episodes", json={"environment": "echo", "problem": {
        **problem("p-refused"), "metadata": {"refuse": True}}})
    assert refused.status_code == 422 and refused.json()["detail"][0]["field"] == "problem"
    assert "echo: this problem is refused" in refused.json()["detail"][0]["msg"]
    created = client.create("echo", problem("p-broken"))
    broken = call(server, "POST", f"/v1/episodes/{created.episode_id}/step", json={"action": "raise", "turn": 0})
    assert broken.status_code == 500 and "RuntimeError: the environment broke" in broken.json()["detail"]
    after = call(server, "POST", f"/v1/episodes/{created.episode_id}/step", json={"action": "x", "turn": 0})
    assert after.status_code == 410 and "failed at turn 0" in after.json()["detail"]


def test_tokens_and_scopes(server, client):
    body = {"environment": "echo", "problem": problem("p-auth")}
    assert call(server, "POST", "/v1/episodes", token=None, json=body).status_code == 401
    assert call(server, "POST", "/v1/episodes", token="not-a-token-0123456789", json=body).status_code == 401
    forbidden = call(server, "POST", "/v1/episodes", token=READ, json=body)
    assert forbidden.status_code == 403 and "'score'" in forbidden.json()["detail"]
    created = client.create("echo", problem("p-auth"))
    path = f"/v1/episodes/{created.episode_id}"
    assert call(server, "POST", path + "/step", token=READ, json={"action": "x", "turn": 0}).status_code == 403
    assert call(server, "DELETE", path, token=READ).status_code == 403
    assert call(server, "GET", path, token=READ).status_code == 200  # reading a transcript is a read
    assert call(server, "GET", path, token=None).status_code == 401
    client.close_episode(created.episode_id)


def test_a_finished_episode_is_one_attempt_in_the_ledger(client, served):
    created = client.create("echo", problem("p-ledger"))
    client.step(created.episode_id, "tool:1", 0)
    client.step(created.episode_id, "tool:2", 1)
    client.step(created.episode_id, "answer:4", 2)
    client.step(created.episode_id, "answer:4", 2)  # a retry of the last turn records nothing more
    rows = client.ledger_query("SELECT prompt_id, domain, reward, status, item_id, turns, tool_calls FROM attempts "
                               "WHERE prompt_id = 'p-ledger'").rows
    assert rows == [["p-ledger", "math", 1.0, "correct", created.episode_id, 3, 2]]
    assert "p-ledger" in served[1].read_text().split()  # the environment was closed when the episode ended


def test_a_replica_records_a_finished_episode_at_the_ledger_owner(tmp_path_factory):
    owner = ServerProcess("--ledger", str(tmp_path_factory.mktemp("owner") / "ledger.duckdb")).start()
    replica, _ = start(tmp_path_factory, "--ledger-owner", owner.url, ledger=False)
    try:
        with EpisodeClient(replica.url, token=SCORE, timeout_s=60) as client:
            created = client.create("echo", problem("p-replica"))
            client.step(created.episode_id, "tool:1", 0)
            client.step(created.episode_id, "answer:4", 1)
            client.step(created.episode_id, "answer:4", 1)  # a retry: recorded once
        rows = httpx.post(owner.url + "/v1/ledger/query", timeout=60, json={
            "sql": "SELECT item_id, reward, turns, tool_calls FROM attempts WHERE prompt_id = 'p-replica'"}).json()
        assert rows["rows"] == [[created.episode_id, 1.0, 2, 1]]
    finally:
        replica.stop()
        owner.stop()


def test_an_idle_episode_is_closed_and_its_environment_freed(tmp_path_factory):
    server, closed = start(tmp_path_factory, "--set", "episodes.idle_timeout_s=1")
    try:
        with EpisodeClient(server.url, token=SCORE, timeout_s=60) as client:
            created = client.create("echo", problem("p-idle"))
            deadline = time.monotonic() + 30
            while "p-idle" not in (closed.read_text().split() if closed.exists() else []):
                assert time.monotonic() < deadline, "the idle episode was not closed"
                time.sleep(0.2)
            with pytest.raises(RewardServerError) as gone:
                client.step(created.episode_id, "tool:late", 0)
            assert gone.value.status == 410 and "episodes.idle_timeout_s" in gone.value.detail
    finally:
        server.stop()


def test_an_episode_open_at_shutdown_is_closed(tmp_path_factory):
    server, closed = start(tmp_path_factory)
    try:
        with EpisodeClient(server.url, token=SCORE, timeout_s=60) as client:
            client.create("echo", problem("p-open-at-shutdown"))
    finally:
        assert server.stop() == 0
    assert "p-open-at-shutdown" in closed.read_text().split()
