"""OpenRLHF's own rollout code scores through scalerl: `PromptDataset` builds prompts and labels, and
`SingleTurnAgentExecutor` (OpenRLHF 0.11's remote reward client) posts to the server's `/get_reward`,
or calls `scalerl_env/adapters/openrlhf.py`'s `reward_func` in its function-file mode.

openrlhf is installed without its dependencies (`pip install --no-deps`): its pinned flash-attn and
deepspeed need a CUDA build, which a CPU machine cannot do (docs/server.md). The code driven here
needs neither. What stands in for OpenRLHF's parts that do: the vLLM engine (`TinyEngine`, sampling the
tiny policy with HF `generate`) and the DeepSpeed strategy (which `PromptDataset` reads `args` from).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
import scalerl.env.adapters.openrlhf as adapter
from scalerl.env.adapters import TOKEN_ENV, URL_ENV

from tests.env.rl_support import (
    EXPECTED_REWARD,
    PROBLEMS,
    RL_TOKEN,
    dead_url,
    doc_block,
    require,
    secured_args,
    tiny_policy,
    tiny_tokenizer,
)
from tests.support.server_harness import shared_server

require("openrlhf")
pytestmark = [pytest.mark.rl, pytest.mark.timeout(600)]
SAMPLES_PER_PROMPT = 4


@pytest.fixture(scope="module")
def server(request):
    return shared_server(request, "rl-openrlhf")


@pytest.fixture(scope="module")
def secured(request, tmp_path_factory):
    """A server that wants a token: OpenRLHF's own remote client cannot send one (it posts bare JSON)."""
    return shared_server(request, "rl-openrlhf-secured", *secured_args(tmp_path_factory.mktemp("tokens")))


class TinyEngine:
    """The one call OpenRLHF makes on its vLLM engine, `generate`, answered by the tiny HF policy."""

    def __init__(self) -> None:
        self.model = tiny_policy()

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        import torch

        ids = torch.tensor([prompt_token_ids])
        out = self.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True,
                                  max_new_tokens=sampling_params.max_tokens)
        tokens = out[0, len(prompt_token_ids):].tolist()
        finish = "stop" if tokens and tokens[-1] == self.model.generation_config.eos_token_id else "length"
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=tokens, finish_reason=finish, logprobs=None)])


def prompt_dataset(rows: list[dict], tokenizer):
    """OpenRLHF's PromptDataset with `--data.input_key prompt --data.label_key answer --data.apply_chat_template`."""
    from openrlhf.datasets import PromptDataset

    import datasets

    data_args = SimpleNamespace(input_key="prompt", label_key="answer", apply_chat_template=True, image_key="images")
    strategy = SimpleNamespace(args=SimpleNamespace(data=data_args), is_rank_0=lambda: True)
    return PromptDataset(datasets.Dataset.from_list(rows), tokenizer, strategy)


def rollouts(remote_rm_url: str, rows: list[dict]) -> list[dict]:
    """SingleTurnAgentExecutor.execute for every prompt, SAMPLES_PER_PROMPT times, as OpenRLHF's rollout does."""
    import torch
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    torch.manual_seed(0)
    tokenizer, engine = tiny_tokenizer(), TinyEngine()
    executor = SingleTurnAgentExecutor(remote_rm_url)
    dataset = prompt_dataset(rows, tokenizer)
    params = SimpleNamespace(max_tokens=4, logprobs=None)

    async def run_all():
        return [await executor.execute(prompt, label, params, 16, tokenizer, engine)
                for _, prompt, label, _ in dataset for _ in range(SAMPLES_PER_PROMPT)]

    outputs = asyncio.run(run_all())
    for out in outputs:
        action = out["observation_tokens"][out["action_ranges"][0][0]:]
        out["text"] = tokenizer.decode(action, skip_special_tokens=True)
    return outputs


def values(x) -> list[float]:
    """A per-query value as OpenRLHF stores it: the one-element list (HTTP) or tensor (function file)."""
    import torch

    return torch.as_tensor(x, dtype=torch.float64).flatten().tolist()


def check(outputs: list[dict], problems=PROBLEMS) -> None:
    assert len(outputs) == SAMPLES_PER_PROMPT * len(problems)
    for out in outputs:
        assert out["text"] in EXPECTED_REWARD, out["text"]
        expected = EXPECTED_REWARD[out["text"]]
        assert out["reward"] is not None, "OpenRLHF got no reward (it logs request failures at info level)"
        assert values(out["reward"]) == values(out["scores"]) == [expected], out["text"]
    assert {0.0, 1.0} <= {values(out["reward"])[0] for out in outputs}


def test_remote_reward_model_url(server):
    rows = [{"prompt": [{"role": "user", "content": f"solve {p.tag}"}], "answer": p.reference_text()}
            for p in PROBLEMS]
    outputs = rollouts(server.url + "/get_reward", rows)
    check(outputs)
    # OpenRLHF's query is prompt + response decoded with special tokens: the prompt strips cleanly.
    assert all(values(out["extra_logs"]["prompt_not_stripped"]) == [0.0] for out in outputs)


def test_reward_function_file(server, monkeypatch):
    monkeypatch.setenv(URL_ENV, server.url)
    rows = [{"prompt": f"solve {p.tag}", "answer": p.reference_text()} for p in PROBLEMS]
    check(rollouts(adapter.__file__, rows))


def test_reward_function_file_with_a_token_and_replicas(secured, monkeypatch):
    # The way to a token-protected server: the function file reads SCALERL_REWARD_TOKEN, and fails
    # over from the dead replica listed first.
    monkeypatch.setenv(URL_ENV, f"{dead_url()},{secured.url}")
    monkeypatch.setenv(TOKEN_ENV, RL_TOKEN)
    rows = [{"prompt": f"solve {p.tag}", "answer": p.reference_text()} for p in PROBLEMS]
    check(rollouts(adapter.__file__, rows))


def test_remote_url_gets_no_reward_from_a_token_protected_server(secured):
    # OpenRLHF 0.11's remote client sends no Authorization header: 401, which it logs at info level and
    # retries (5 times, 1 s apart) before leaving the sample without a reward (docs/server.md).
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    executor = SingleTurnAgentExecutor(secured.url + "/get_reward")
    with pytest.raises(RuntimeError, match="Request error for 5 times"):
        asyncio.run(executor._fetch_rewards_via_http(["solve <q0>\\boxed{2}"], ["solve <q0>"], ["2"]))


def test_object_labels_from_a_dataset_column(server):
    # Labels stored as objects: the dataset column fills the fields a row lacks with None.
    code = [p for p in PROBLEMS if p.domain == "code"]
    rows = [{"prompt": f"solve {p.tag}", "answer": p.reference} for p in code]
    check(rollouts(server.url + "/get_reward", rows), code)


def test_docs_show_these_settings():
    # The documented flags are the PromptDataset settings and the URL path used above.
    command = " ".join(doc_block("OpenRLHF (remote reward model)", "bash").split())
    for flag in ("--data.input_key prompt", "--data.label_key answer", "--data.apply_chat_template",
                 "--reward.remote_url http://127.0.0.1:8000/get_reward"):
        assert flag in command
