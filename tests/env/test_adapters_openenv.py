"""TRL's own `GRPOTrainer` plays episodes of a served environment through its documented environment path.

The environment (`tests.support.guess_environment`, installed as a plug-in the way pip would) runs in an
OpenEnv server process (`python -m scalerl.env.adapters.openenv`, over real HTTP/WebSocket); TRL gets
`environment_factory=tool_environment(url, tool="guess")` and `reward_funcs=[episode_reward]`. The tiny
policy's moves are known: on the question it calls the tool with the right or the wrong guess; after a
tool result it guesses right again or stops. So every episode's reward is known from its tool calls, and
the server's step log shows that the episodes went through the environment, with the rewards TRL used.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time

import httpx
import pytest
from scalerl.env.contracts.records import ProblemRecord

from tests.env.rl_support import SPECIALS, require, tiny_policy, tiny_tokenizer
from tests.support.guess_environment import FEEDBACK, GUESS_LOG_ENV, install_guess_environment
from tests.support.server_harness import REPO, free_port

require("trl")
require("openenv")
pytestmark = [pytest.mark.rl, pytest.mark.timeout(900)]
STEPS, GENERATIONS = 2, 4
ANSWER, WRONG_GUESS = "7", "5"


def call(guess: str) -> str:
    return json.dumps({"name": "guess", "arguments": {"code": guess}})


RIGHT, WRONG, RESULT, STOP = f"<call>{call(ANSWER)}</call>", f"<call>{call(WRONG_GUESS)}</call>", "<result>", "done"
VOCAB = [*SPECIALS, "<g0>", RIGHT, WRONG, RESULT, STOP, "solve"]
FOLLOWS = {"<g0>": [RIGHT, WRONG], RESULT: [RIGHT, STOP]}
# A chat template that renders tool calls and tool results (TRL checks both), prefix-preserving; a tool
# result ends in <result>, so the policy's next move depends on having seen one.
TOOL_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'assistant' and m.get('tool_calls') -%}"
    "{%- for c in m['tool_calls'] %}<call>{{ c['function'] | tojson }}</call>{% endfor -%}"
    "{%- elif m['role'] == 'tool' -%}{{ m['content'] }} <result>"
    "{%- else -%}{{ m['content'] }}{%- endif -%}"
    "{%- if not loop.last %} {% endif -%}"
    "{%- endfor -%}"
)
# transformers 5.10 parses responses with a `response_schema` (TRL sets one only for the templates it knows).
RESPONSE_SCHEMA = {
    "x-regex": r"^(?P<content>(?:(?!<call>)[\s\S])*?)\s*(?P<tool_calls>(?:<call>[\s\S]+?</call>\s*)+)?\s*(?:<eos>)?$",
    "type": "object",
    "properties": {
        "role": {"const": "assistant"},
        "content": {"type": "string"},
        "tool_calls": {
            "type": "array",
            "x-regex-iterator": r"<call>\s*(.+?)\s*</call>",
            "items": {
                "x-parser": "json",
                "x-parser-args": {"transform": "{type: 'function', function: @}"},
                "type": "object",
                "properties": {
                    "type": {"const": "function"},
                    "function": {"type": "object", "properties": {
                        "name": {"type": "string"}, "arguments": {"type": "object", "additionalProperties": {}}}},
                },
            },
        },
    },
}


@contextlib.contextmanager
def openenv_server(environment: str, folder, **env_vars: str):
    """`python -m scalerl.env.adapters.openenv` for `environment` in a child process; yields its URL."""
    port, out = free_port(), folder / f"{environment}-server.log"
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", **env_vars}
    cmd = [sys.executable, "-m", "scalerl.env.adapters.openenv", "--environment", environment, "--port", str(port)]
    with open(out, "wb") as sink:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, out)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The OpenEnv server of `guess`, installed as a plug-in; yields (url, step log path)."""
    root = install_guess_environment(tmp_path_factory.mktemp("plugin"))
    log_path = root / "steps.jsonl"
    path = os.pathsep.join([str(root), str(REPO)])
    with openenv_server("guess", root, PYTHONPATH=path, **{GUESS_LOG_ENV: str(log_path)}) as url:
        yield url, log_path


def wait_healthy(url: str, proc: subprocess.Popen, out, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the OpenEnv server exited:\n{out.read_text()[-3000:]}"
        try:
            if httpx.get(url + "/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the OpenEnv server did not become healthy:\n{out.read_text()[-3000:]}")


def problems() -> list[ProblemRecord]:
    return [ProblemRecord(prompt_id=f"guess-{i}", domain="math", source="test",
                          prompt=[{"role": "user", "content": "solve <g0>"}], answer=ANSWER) for i in range(2)]


def guesses(completion: list[dict]) -> list[str]:
    return [c["function"]["arguments"]["code"] for m in completion for c in m.get("tool_calls") or []]


def train(url: str, out_dir) -> list[tuple[list[dict], float]]:
    """GRPOTrainer for STEPS steps through the environment; every (completion messages, reward) TRL logged."""
    from scalerl.env.adapters.openenv import episode_reward, problem_rows, tool_environment
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    import datasets

    class Record(TrainerCallback):
        def __init__(self) -> None:
            self.trainer, self.pairs = None, []

        def on_step_end(self, args, state, control, **kwargs):
            logs = self.trainer._logs
            self.pairs += list(zip(logs["completion"], logs["rewards"]["episode_reward"], strict=True))

    tokenizer = tiny_tokenizer(VOCAB, TOOL_TEMPLATE)
    tokenizer.response_schema = RESPONSE_SCHEMA
    args = GRPOConfig(
        output_dir=str(out_dir), use_cpu=True, max_steps=STEPS, learning_rate=1e-5, seed=0,
        per_device_train_batch_size=2 * GENERATIONS, num_generations=GENERATIONS, max_completion_length=40,
        max_tool_calling_iterations=2, logging_steps=1, report_to="none", save_strategy="no", bf16=False,
        dataloader_num_workers=0,
    )
    record = Record()
    trainer = GRPOTrainer(model=tiny_policy(vocab_list=VOCAB, follows=FOLLOWS), reward_funcs=[episode_reward],
                          args=args, train_dataset=datasets.Dataset.from_list(problem_rows(problems())),
                          processing_class=tokenizer, callbacks=[record],
                          environment_factory=tool_environment(url, tool="guess", fence=None))
    record.trainer = trainer
    trainer.train()
    assert trainer.state.global_step == STEPS
    return record.pairs


def test_grpo_plays_served_episodes(served, tmp_path, monkeypatch):
    url, log_path = served
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    pairs = train(url, tmp_path)
    assert len(pairs) == STEPS * 2 * GENERATIONS
    for completion, reward in pairs:
        made = guesses(completion)
        assert made and set(made) <= {ANSWER, WRONG_GUESS}, f"unexpected tool calls in {completion}"
        assert reward == (1.0 if ANSWER in made else 0.0), f"{made} got {reward}"
        if made[0] == WRONG_GUESS:  # the environment's feedback reached the model as the tool's answer
            assert any(m["role"] == "tool" and m["content"] == FEEDBACK for m in completion)
    steps = [json.loads(line) for line in log_path.read_text().splitlines()]
    ends = [s for s in steps if s["done"]]
    assert len(ends) == len(pairs), "one episode per rollout, each ended by the environment"
    assert sorted(s["reward"] for s in ends) == sorted(r for _, r in pairs)
    assert any(s["turn"] == 2 and s["reward"] == 1.0 for s in ends), "no fixed second guess scored 1"
    assert any(s["reward"] == 0.0 for s in ends) and any(s["turn"] == 1 and s["reward"] == 1.0 for s in ends)


VERL_TOOLS = """tools:
  - class_name: scalerl.env.adapters.verl_episode.ScaleRLEpisodeTool
    config: {type: native, environment: guess, url: "URL", fence: null}
"""


def test_verl_tool_agent_loop_calls_play_served_episodes(served, tmp_path):
    """veRL's own tool loading and `ToolAgentLoop._call_tool` (create, execute, release per call) drive the
    tool; each trajectory is one served episode, and the reward function reads its verdict."""
    require("verl")
    import asyncio
    from uuid import uuid4

    from scalerl.env.adapters.openenv import EPISODE_OVER
    from scalerl.env.adapters.verl_episode import compute_score
    from verl.experimental.agent_loop.tool_agent_loop import AgentData, ToolAgentLoop
    from verl.experimental.agent_loop.tool_parser import FunctionCall
    from verl.tools.tool_registry import initialize_tools_from_config

    url, log_path = served
    config = tmp_path / "tools.yaml"
    config.write_text(VERL_TOOLS.replace("URL", url))
    [tool] = initialize_tools_from_config(str(config))
    loop = ToolAgentLoop.__new__(ToolAgentLoop)  # only what `_call_tool` reads
    loop.tools, loop.max_tool_response_length, loop.tool_response_truncate_side = {tool.name: tool}, 256, "middle"

    async def play(prompt_id: str, moves: list[str]) -> tuple[AgentData, list[tuple[str, float]]]:
        problem = problems()[0].model_copy(update={"prompt_id": prompt_id})
        kwargs = {tool.name: {"create_kwargs": {"problem": problem.model_dump_json()}}}
        data = AgentData(messages=[], image_data=None, video_data=None, audio_data=None, mm_processor_kwargs=None,
                         metrics={}, request_id=uuid4().hex, tools_kwargs=kwargs)
        replies = []
        for move in moves:
            call_ = FunctionCall(name=tool.name, arguments=json.dumps({"code": move}))
            response, reward, _ = await loop._call_tool(call_, kwargs, data)
            replies.append((response.text, reward))
        return data, replies

    fixed, replies = asyncio.run(play("verl-fixed", [WRONG_GUESS, ANSWER, ANSWER]))
    assert replies == [(FEEDBACK, 0.0), (EPISODE_OVER, 1.0), (EPISODE_OVER, 0.0)]
    failed, replies = asyncio.run(play("verl-failed", [WRONG_GUESS, WRONG_GUESS]))
    assert replies == [(FEEDBACK, 0.0), (EPISODE_OVER, 0.0)]
    # veRL's reward loop merges into extra_info the trajectory's extra fields (scored in the agent loop) or
    # their tool_extra_fields (scored on the batch)
    for data, reward in ((fixed, 1.0), (failed, 0.0)):
        for merged in (data.extra_fields, data.extra_fields["tool_extra_fields"]):
            assert compute_score("guess", "", ANSWER, {"index": 0, **merged})["score"] == reward
    assert compute_score("my/math", "So \\boxed{7}", ANSWER, {"index": 0})["score"] == 1.0  # no episode: single-turn
    steps = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert [s["action"] for s in steps if s["prompt_id"] == "verl-fixed"] == [WRONG_GUESS, ANSWER]
    assert [s["turn"] for s in steps if s["prompt_id"] == "verl-failed"] == [1, 2]


def environments_block(heading: str, lang: str) -> str:
    """The first ```lang block under `### heading` in docs/environments.md."""
    section = (REPO / "docs" / "environments.md").read_text().split(f"### {heading}", 1)[1].split("\n### ", 1)[0]
    return section.split(f"```{lang}\n", 1)[1].split("```", 1)[0]


def test_docs_show_these_constructions():
    trl = environments_block("TRL (`GRPOTrainer(environment_factory=...)`)", "python")
    assert "reward_funcs=[episode_reward]" in trl and "environment_factory=tool_environment(" in trl
    assert "problem_rows(" in trl
    verl = environments_block("veRL (tool agent loop)", "yaml")
    assert VERL_TOOLS.splitlines()[1] in verl and "config: {type: native, environment: " in verl


# Visible: the first two cases; hidden: the last two, with values that appear nowhere else.
SUM_TESTS = {"kind": "stdio", "compare": "tokens", "cases": [
    {"input": "1 2\n", "output": "3\n"}, {"input": "3 4\n", "output": "7\n"},
    {"input": "1234 4321\n", "output": "5555\n"}, {"input": "8080 1\n", "output": "8081\n"}]}
HIDDEN = ("1234", "4321", "5555", "8080", "8081")


def test_code_feedback_served_as_openenv(tmp_path):
    """The built-in `code-feedback` over OpenEnv: the failing visible test comes back, the fixed second
    submission scores 1, and no hidden test reaches any observation."""
    from scalerl.env.adapters.openenv import OpenEnvEpisode

    problem = ProblemRecord(prompt_id="cf-sum", domain="code", source="test", tests=SUM_TESTS,
                            prompt=[{"role": "user", "content": "Read two integers a b and print a+b."}])
    with openenv_server("code-feedback", tmp_path) as url:
        episode = OpenEnvEpisode(url, problem)
        try:
            steps = [episode.reset(), episode.step("```python\nprint(3)\n```"),
                     episode.step("```python\na, b = map(int, input().split())\nprint(a + b)\n```")]
        finally:
            episode.close()
    first, wrong, fixed = steps
    assert not wrong.done and "Input:\n3 4" in wrong.observation[0].content  # the first failing visible test
    assert fixed.done and fixed.reward == 1.0 and fixed.verdict.status.value == "correct" and fixed.turn == 2
    seen = " ".join(m.content for s in steps for m in s.observation) + json.dumps(fixed.info)
    assert not [h for h in HIDDEN if h in seen], "a hidden test reached the model"


def test_verl_tool_in_process_code_feedback(tmp_path):
    """Without `url` the tool runs the installed `code-feedback` in its own process; code goes in a python
    block; the episode's end is the tool's reward."""
    require("verl")
    import asyncio
    from uuid import uuid4

    from verl.experimental.agent_loop.tool_agent_loop import AgentData
    from verl.tools.tool_registry import initialize_tools_from_config

    config = tmp_path / "tools.yaml"
    config.write_text(VERL_TOOLS.replace(', url: "URL", fence: null', "").replace("guess", "code-feedback"))
    [tool] = initialize_tools_from_config(str(config))
    problem = ProblemRecord(prompt_id="cf-verl", domain="code", source="test", tests=SUM_TESTS,
                            prompt=[{"role": "user", "content": "Read two integers a b and print a+b."}])
    data = AgentData(messages=[], image_data=None, video_data=None, audio_data=None, mm_processor_kwargs=None,
                     metrics={}, request_id=uuid4().hex, tools_kwargs={})

    async def submit(code: str):
        instance, _ = await tool.create(create_kwargs={"problem": problem.model_dump()})
        try:
            return await tool.execute(instance, {"code": code}, agent_data=data)
        finally:
            await tool.release(instance)

    feedback, reward, _ = asyncio.run(submit("print(3)"))
    assert reward == 0.0 and "Input:\n3 4" in feedback.text
    _, reward, record = asyncio.run(submit("a, b = map(int, input().split())\nprint(a + b)"))
    assert reward == 1.0 and record["status"] == "correct" and record["turns"] == 2
    assert data.extra_fields["scalerl_episode"]["done"] is True
