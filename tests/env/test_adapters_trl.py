"""TRL's own `GRPOTrainer` (from PyPI) trains 2 optimizer steps on CPU with scalerl's reward over HTTP.

The policy is `rl_support.tiny_policy`: every completion it can produce is known, so each reward TRL
records is checked against what that completion deserves. Datasets are HF `datasets` built in code:
conversational prompts with code references as objects (a mixed stdio/functional struct column) and
plain prompts with references as text (math answers and JSON code specs); `prompt_id` is an integer
column in both, and the server's ledger must hold the verdicts under those ids.
"""

from __future__ import annotations

import pytest
from scalerl.env.client import TOKEN_ENV, RewardServerError

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

require("trl")
pytestmark = [pytest.mark.rl, pytest.mark.timeout(900)]
STEPS, GENERATIONS = 2, 4
DOC_URL = "http://127.0.0.1:8000"


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ledger")
    return shared_server(request, "rl-trl", "--ledger", str(folder / "ledger.duckdb"), *secured_args(folder))


def conversational_objects(id_base: int):
    import datasets

    code = [p for p in PROBLEMS if p.domain == "code"]
    return datasets.Dataset.from_list([
        {"prompt": [{"role": "user", "content": f"solve {p.tag}"}], "answer": p.reference, "prompt_id": id_base + i}
        for i, p in enumerate(code)
    ])


def plain_text(id_base: int):
    import datasets

    return datasets.Dataset.from_list([
        {"prompt": f"solve {p.tag}", "answer": p.reference_text(), "prompt_id": id_base + i}
        for i, p in enumerate(PROBLEMS)
    ])


def train(url: str, dataset, out_dir) -> list[tuple[str, float]]:
    """Run GRPOTrainer for STEPS optimizer steps; return every (completion text, reward) TRL recorded."""
    from scalerl.env.adapters.trl import ScaleRLReward, completion_text
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    class Record(TrainerCallback):
        def __init__(self) -> None:
            self.trainer, self.pairs = None, []

        def on_step_end(self, args, state, control, **kwargs):
            logs = self.trainer._logs  # what TRL logs as its completions table, one generation batch per step
            self.pairs += [(completion_text(c), r)
                           for c, r in zip(logs["completion"], logs["rewards"]["scalerl_reward"])]

    reward = ScaleRLReward(url, reference_key="answer")  # docs/server.md's line, its URL this server's
    args = GRPOConfig(
        output_dir=str(out_dir), use_cpu=True, max_steps=STEPS, learning_rate=1e-5, seed=0,
        per_device_train_batch_size=2 * GENERATIONS, num_generations=GENERATIONS, max_completion_length=4,
        logging_steps=1, report_to="none", save_strategy="no", bf16=False, dataloader_num_workers=0,
    )
    record = Record()
    trainer = GRPOTrainer(model=tiny_policy(), reward_funcs=[reward], args=args, train_dataset=dataset,
                          processing_class=tiny_tokenizer(), callbacks=[record])
    record.trainer = trainer
    trainer.train()
    assert trainer.state.global_step == STEPS
    return record.pairs


def ledger_count(url: str, ids: list[int]) -> int:
    from scalerl.env.client import RewardClient

    quoted = ", ".join(f"'{i}'" for i in ids)
    with RewardClient(url) as client:
        return client.ledger_query(f"SELECT count(*) FROM attempts WHERE prompt_id IN ({quoted})").rows[0][0]


def check(pairs: list[tuple[str, float]], problems) -> None:
    assert len(pairs) == STEPS * 2 * GENERATIONS
    for text, got in pairs:
        assert text in EXPECTED_REWARD, f"the tiny policy produced an unexpected completion {text!r}"
        assert got == EXPECTED_REWARD[text], f"{text!r} got {got}, deserves {EXPECTED_REWARD[text]}"
    seen = {text for text, _ in pairs}
    assert all({p.right, p.wrong} & seen for p in problems), "a prompt was never sampled"
    assert {0.0, 1.0} <= {got for _, got in pairs}


def test_grpo_conversational_prompts_object_code_references(server, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv(TOKEN_ENV, RL_TOKEN)
    pairs = train(server.url, conversational_objects(2000), tmp_path)
    check(pairs, [p for p in PROBLEMS if p.domain == "code"])
    assert ledger_count(server.url, [2000, 2001]) == len(pairs)


def test_grpo_plain_prompts_text_references(server, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv(TOKEN_ENV, RL_TOKEN)
    dead = dead_url()
    pairs = train(f"{dead},{server.url}", plain_text(3000), tmp_path)  # a dead replica first: failed over
    from scalerl.env.adapters import _client

    stats = _client(f"{dead},{server.url}", RL_TOKEN).stats()  # the adapter's client, as TRL's reward used it
    assert stats.failovers >= 1 and {r.url: r.failures >= 1 for r in stats.replicas}[dead]
    check(pairs, PROBLEMS)
    assert ledger_count(server.url, [3000, 3001, 3002, 3003]) == len(pairs)


def test_reward_without_the_token_is_refused(server, monkeypatch):
    from scalerl.env.adapters.trl import ScaleRLReward

    monkeypatch.delenv(TOKEN_ENV, raising=False)
    reward = ScaleRLReward(server.url)
    with pytest.raises(RewardServerError) as info:
        reward(prompts=["solve <q0>"], completions=[PROBLEMS[0].right], answer=["2"])
    assert info.value.status == 401
    assert ScaleRLReward(server.url, token=RL_TOKEN)(
        prompts=["solve <q0>"], completions=[PROBLEMS[0].right], answer=["2"]) == [1.0]


def test_docs_show_this_construction():
    block = doc_block("TRL (GRPOTrainer reward function)", "python")
    assert f'reward = ScaleRLReward("{DOC_URL}", reference_key="answer")' in block
    assert "reward_funcs=[reward]" in block and "train_dataset=dataset" in block
