"""TRL's own `GRPOTrainer` plays episodes of a served environment through its documented environment path.

The environment (`tests.support.guess_environment`, installed as a plug-in the way pip would) runs in an
OpenEnv server process (`python -m scalerl.env.adapters.openenv`, over real HTTP/WebSocket); TRL gets
`environment_factory=tool_environment(url, tool="guess")` and `reward_funcs=[episode_reward]`. The tiny
policy's moves are known: on the question it calls the tool with the right or the wrong guess; after a
tool result it guesses right again or stops. So every episode's reward is known from its tool calls, and
the server's step log shows that the episodes went through the environment, with the rewards TRL used.
"""

from __future__ import annotations

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


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The OpenEnv server of `guess` in a child process; yields (url, step log path)."""
    root = install_guess_environment(tmp_path_factory.mktemp("plugin"))
    log_path, port = root / "steps.jsonl", free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(REPO)]), GUESS_LOG_ENV: str(log_path),
           "OMP_WAIT_POLICY": "PASSIVE"}
    cmd = [sys.executable, "-m", "scalerl.env.adapters.openenv", "--environment", "guess", "--port", str(port)]
    out = root / "server.log"
    with open(out, "wb") as sink:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, out)
        yield url, log_path
    finally:
        proc.terminate()
        proc.wait(timeout=30)


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
