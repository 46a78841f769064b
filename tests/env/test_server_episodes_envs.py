"""The built-in environments served over real HTTP (`scalerl-env serve` in a child process), driven by scripted
policies through `EpisodeClient` and raw requests: code feedback returns the failing visible test and a fixed
second submission scores 1, no hidden test reaches any response body, tool output returns, a retried step
counts once, and each episode is one attempt in the ledger with its turns and tool calls."""

from __future__ import annotations

import httpx
import pytest
from scalerl.env.episode_client import EpisodeClient

from tests.env.test_environments import HIDDEN_IN, HIDDEN_OUT, LEAKY_PROGRAMS, REVERSE, math_record, reverse_record
from tests.support.server_harness import ServerProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = ServerProcess("--ledger", str(tmp_path_factory.mktemp("episodes") / "ledger.duckdb")).start()
    yield server
    server.stop()


@pytest.fixture
def client(server):
    with EpisodeClient(server.url, timeout_s=120) as c:
        yield c


def attempts(client, prompt_id: str) -> list[list]:
    return client.ledger_query("SELECT domain, reward, status, turns, tool_calls FROM attempts "
                               f"WHERE prompt_id = '{prompt_id}'").rows


def play_raw(server, environment: str, problem, actions: list[str], **limits) -> list[httpx.Response]:
    """Every answer of one episode played with plain HTTP: create, each step, the transcript, the close."""
    body = {"environment": environment, "problem": problem.model_dump(mode="json"), "limits": limits}
    answers = [httpx.post(server.url + "/v1/episodes", json=body, timeout=120)]
    episode = server.url + "/v1/episodes/" + answers[0].json()["episode_id"]
    for turn, action in enumerate(actions):
        answers.append(httpx.post(episode + "/step", json={"action": action, "turn": turn}, timeout=120))
        if answers[-1].json()["done"]:
            break
    answers += [httpx.get(episode, timeout=60), httpx.delete(episode, timeout=60)]
    assert [a.status_code for a in answers] == [200] * len(answers), [a.text for a in answers]
    return answers


def test_feedback_then_a_fixed_submission_scores_1_and_is_recorded(client):
    problem = reverse_record()
    episode = client.episode("code-feedback", problem)
    episode.reset()
    feedback = episode.step("```python\nprint(input())\n```")
    text = feedback.observation[0].content
    assert not feedback.done and "Visible test 1 of 1 failed (wrong)" in text and "Input:\nabc" in text
    end = episode.step(REVERSE)
    assert end.done and end.reward == 1.0 and end.verdict.status == "correct"
    episode.close()
    assert attempts(client, problem.prompt_id) == [["code", 1.0, "correct", 2, 0]]


@pytest.mark.parametrize("program", LEAKY_PROGRAMS[:3])
def test_no_hidden_test_reaches_any_response_body(server, program):
    fenced = f"```python\n{program}\n```"
    answers = play_raw(server, "code-feedback", reverse_record(), [fenced] * 3, max_turns=3)
    bodies = "\n".join(a.text for a in answers)
    assert '"done":true' in bodies.replace(" ", "")
    assert HIDDEN_IN not in bodies and HIDDEN_OUT not in bodies


def test_tool_output_returns_and_the_answer_is_scored(client):
    problem = math_record().model_copy(update={"prompt_id": "m-served"})
    episode = client.episode("math-tool", problem)
    episode.reset()
    tool = episode.step("Let me compute.\n```python\nprint(2 ** 10)\n```")
    assert tool.observation[0].role == "tool" and "stdout:\n1024" in tool.observation[0].content
    end = episode.step("So the answer is $\\boxed{1024}$.")
    assert end.done and end.reward == 1.0 and end.info["tool_calls"] == 1
    episode.close()
    assert attempts(client, "m-served") == [["math", 1.0, "correct", 2, 1]]


def test_a_retried_step_counts_once(server, client):
    problem = math_record().model_copy(update={"prompt_id": "m-retried"})
    created = client.create("math-tool", problem)
    path = f"{server.url}/v1/episodes/{created.episode_id}/step"
    call = {"action": "```python\nprint(7 * 6)\n```", "turn": 0}
    first, again = httpx.post(path, json=call, timeout=120), httpx.post(path, json=call, timeout=120)
    assert first.status_code == again.status_code == 200 and first.text == again.text
    final = {"action": "\\boxed{1024}", "turn": 1}
    end, end_again = httpx.post(path, json=final, timeout=120), httpx.post(path, json=final, timeout=120)
    assert end.json()["done"] and end.text == end_again.text and end.json()["info"]["tool_calls"] == 1
    assert attempts(client, "m-retried") == [["math", 1.0, "correct", 2, 1]]
    client.close_episode(created.episode_id)
