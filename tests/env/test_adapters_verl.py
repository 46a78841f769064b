"""veRL 0.9's own config and data path scores through scalerl's server: the settings are read from docs/server.md.

veRL's `ppo_trainer` config is composed with the documented overrides; the parquet goes through
`RLHFDataset` and `collate_fn` into a `DataProto`; each prompt gets a right and a wrong response (token
ids of the tiny tokenizer); the trainer's reward call, `RewardLoopManager.compute_rm_score`, runs its
reward-loop workers as Ray actors, which load the adapter from the configured path and score over HTTP.
Ground truths are text in one file (math answers, JSON code specs) and objects in another (a mixed
stdio/functional struct column); `extra_info.prompt_id` is an integer and must reach the ledger.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from scalerl.env.adapters import TOKEN_ENV, URL_ENV, AdapterInputError

from tests.env.rl_support import PROBLEMS, RL_TOKEN, VOCAB, dead_url, doc_block, require, secured_args, tiny_tokenizer
from tests.support.server_harness import shared_server

require("verl")
pytestmark = [pytest.mark.rl, pytest.mark.ray, pytest.mark.timeout(900)]
ADAPTER_PATH = '$(python -c "import scalerl.env.adapters.verl as m; print(m.__file__)")'


def documented_overrides() -> list[str]:
    """The `key=value` overrides of docs/server.md's veRL command, the adapter path resolved."""
    import scalerl.env.adapters.verl as adapter

    block = doc_block("veRL (custom reward function)", "bash")
    pairs = re.findall(r"^\s*([a-z_][\w.]*)=(.+?)\s*\\?$", block, re.M)
    assert pairs, "docs/server.md has no veRL overrides"
    return [f"{k}={adapter.__file__ if v == ADAPTER_PATH else v}" for k, v in pairs]


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ledger")
    return shared_server(request, "rl-verl", "--ledger", str(folder / "ledger.duckdb"), *secured_args(folder))


@pytest.fixture(scope="module")
def cluster(server):
    """A local Ray cluster whose workers inherit SCALERL_REWARD_URL (a dead replica, then the server) and
    SCALERL_REWARD_TOKEN, as the documented `export`s do."""
    import os

    import ray

    os.environ[URL_ENV] = f"{dead_url()},{server.url}"
    os.environ[TOKEN_ENV] = RL_TOKEN
    ray.init(num_cpus=2, include_dashboard=False, namespace="scalerl-verl-adapter")
    yield
    ray.shutdown()
    os.environ.pop(URL_ENV, None)
    os.environ.pop(TOKEN_ENV, None)


def verl_config(model_dir: Path, data_file: Path):
    import verl
    from hydra import compose, initialize_config_dir

    overrides = documented_overrides() + [
        f"actor_rollout_ref.model.path={model_dir}", f"data.train_files={data_file}",
        "data.filter_overlong_prompts=False", "reward.num_workers=1",
    ]
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer/config"), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def write_parquet(path: Path, ground_truths: list, id_base: int) -> Path:
    import datasets

    rows = [{"data_source": f"scalerl/{p.domain}", "ability": p.domain,
             "prompt": [{"role": "user", "content": f"solve {p.tag}"}],
             "reward_model": {"style": "rule", "ground_truth": truth},
             "extra_info": {"index": i, "prompt_id": id_base + i}}
            for i, (p, truth) in enumerate(ground_truths)]
    datasets.Dataset.from_list(rows).to_parquet(str(path))
    return path


def rollout(config, tokenizer):
    """veRL's data path to a scored-batch shape: dataset rows, then a right and a wrong response each."""
    import torch
    from verl import DataProto
    from verl.trainer.ppo.utils import create_rl_dataset
    from verl.utils.dataset.rl_dataset import collate_fn

    dataset = create_rl_dataset(config.data.train_files, config.data, tokenizer, None, is_train=True)
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))
    batch = batch.repeat(repeat_times=2, interleave=True)
    tags = [messages[-1]["content"].split()[-1] for messages in batch.non_tensor_batch["raw_prompt"]]
    problem = {p.tag: p for p in PROBLEMS}
    texts = [problem[t].right if i % 2 == 0 else problem[t].wrong for i, t in enumerate(tags)]
    prompts = torch.tensor([tokenizer(tokenizer.apply_chat_template(list(m), tokenize=False))["input_ids"]
                            for m in batch.non_tensor_batch["raw_prompt"]])
    responses = torch.tensor([[VOCAB.index(t), tokenizer.eos_token_id, tokenizer.pad_token_id] for t in texts])
    mask = torch.cat([torch.ones_like(prompts), (responses != tokenizer.pad_token_id).long()], dim=1)
    tensors = {"prompts": prompts, "responses": responses, "attention_mask": mask,
               "input_ids": torch.cat([prompts, responses], dim=1)}
    return batch.union(DataProto.from_dict(tensors=tensors)), [1.0 if i % 2 == 0 else 0.0 for i in range(len(texts))]


def score(tmp_path: Path, data_file: Path):
    """(per-sample rewards the trainer would use, expected rewards, the `acc` column veRL logs)."""
    from verl.experimental.reward_loop import RewardLoopManager
    from verl.trainer.ppo.reward import extract_reward

    model_dir = tmp_path / "tokenizer"
    tiny_tokenizer().save_pretrained(model_dir)
    config = verl_config(model_dir, data_file)
    batch, expected = rollout(config, tiny_tokenizer())
    scored = batch.union(RewardLoopManager(config).compute_rm_score(batch))
    reward_tensor, extra = extract_reward(scored)
    return reward_tensor.sum(dim=-1).tolist(), expected, list(extra["acc"])


def ledger_count(url: str, ids: list) -> int:
    from scalerl.env.client import RewardClient

    quoted = ", ".join(f"'{i}'" for i in ids)
    with RewardClient(url) as client:
        return client.ledger_query(f"SELECT count(*) FROM attempts WHERE prompt_id IN ({quoted})").rows[0][0]


def test_text_ground_truths_math_and_code(server, cluster, tmp_path):
    data = write_parquet(tmp_path / "train.parquet", [(p, p.reference_text()) for p in PROBLEMS], 4000)
    rewards, expected, acc = score(tmp_path, data)
    assert rewards == expected == acc
    assert ledger_count(server.url, [4000, 4001, 4002, 4003]) == 2 * len(PROBLEMS)


def test_object_ground_truths_mixed_stdio_functional(server, cluster, tmp_path):
    code = [p for p in PROBLEMS if p.domain == "code"]
    data = write_parquet(tmp_path / "train.parquet", [(p, p.reference) for p in code], 5000)
    rewards, expected, acc = score(tmp_path, data)
    assert rewards == expected == acc == [1.0, 0.0, 1.0, 0.0]
    assert ledger_count(server.url, [5000, 5001]) == 2 * len(code)


def test_bad_ground_truth_reaches_the_trainer_named(server, cluster, tmp_path):
    bad = {"kind": "stdio", "cases": [{"input": "1\n"}]}  # a case without its expected output
    with pytest.raises(AdapterInputError, match=r"reward_model\.ground_truth.*cases\.0\.output"):
        score(tmp_path, write_parquet(tmp_path / "train.parquet", [(PROBLEMS[2], bad)], 6000))


def test_parquet_written_by_scalerl_env(server, cluster, tmp_path):
    # `scalerl.env.sources.verl.write_records` (behind `scalerl-env data prepare`) writes the verl schema.
    from scalerl.env.contracts.records import ProblemRecord
    from scalerl.env.sources.verl import write_records

    records = [ProblemRecord(prompt_id=f"records-{i}", domain=p.domain, source="scalerl/test",
                             prompt=[{"role": "user", "content": f"solve {p.tag}"}],
                             **({"answer": p.reference} if p.domain == "math" else {"tests": p.reference}))
               for i, p in enumerate(PROBLEMS)]
    write_records(records, tmp_path / "train.parquet")
    rewards, expected, acc = score(tmp_path, tmp_path / "train.parquet")
    assert rewards == expected == acc
    assert ledger_count(server.url, [f"records-{i}" for i in range(len(PROBLEMS))]) == 2 * len(PROBLEMS)
