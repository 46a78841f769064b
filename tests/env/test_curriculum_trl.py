"""TRL's own `GRPOTrainer` (from PyPI), subclassed by the curriculum drop-in, trains a few steps on CPU.

The policy is `rl_support.tiny_policy` with two of its four questions made certain: `<q0>` (math) is
always answered right, so its prompts retire after their first group; `<q2>` (code) always wrong, so
its groups are zero-variance for good; `<q1>` and `<q3>` stay 1/2-1/2. Rewards are scored in process by
`ScaleRLReward`; the curriculum is a `LocalCurriculum` on a fresh ledger with domain weights math 3,
code 1. What the trainer sees is recorded on TRL's side: every reward call (the prompts it generated
for) and every `_compute_loss` input (what reaches the loss).
"""

from __future__ import annotations

import pytest

from tests.env.rl_support import PROBLEMS, VOCAB, require, tiny_policy, tiny_tokenizer

require("trl")
pytestmark = [pytest.mark.rl, pytest.mark.timeout(300)]
GENERATIONS, GROUPS = 4, 4
TAG = {p.tag: p for p in PROBLEMS}


def certain_policy():
    """The tiny policy with `<q0>` always right and `<q2>` always wrong (the other answer's logit zeroed)."""
    import torch

    model = tiny_policy()
    with torch.no_grad():
        for tag, impossible in (("<q0>", TAG["<q0>"].wrong), ("<q2>", TAG["<q2>"].right)):
            model.lm_head.weight[VOCAB.index(impossible), VOCAB.index(tag)] = 0.0
    return model


def dataset(layout: dict[str, int]):
    """`layout`: tag -> number of prompts with it; ids `<tag>-<i>`, the domain from the problem."""
    import datasets

    return datasets.Dataset.from_list([
        {"prompt": f"solve {tag}", "answer": TAG[tag].reference_text(), "prompt_id": f"{tag[1:-1]}-{i}",
         "domain": TAG[tag].domain}
        for tag, n in layout.items() for i in range(n)])


class Seen:
    """TRL-side records: per reward call the prompt ids (with the retired set at that moment), per loss call
    the rows' advantages and completion-token counts."""

    def __init__(self, source) -> None:
        self.source, self.calls, self.losses = source, [], []

    def reward(self):
        from scalerl.env.adapters.trl import ScaleRLReward

        score = ScaleRLReward(None, reference_key="answer")

        def scalerl_reward(prompts, completions, **kwargs):
            self.calls.append((list(kwargs["prompt_id"]), self.source.retired()))
            return score(prompts, completions, **kwargs)
        return scalerl_reward


def local_source(tmp_path, data, weights, strategies=None):
    from scalerl.curriculum.strategy_config import StrategyConfig
    from scalerl.env.adapters.curriculum_source import LocalCurriculum
    from scalerl.env.adapters.trl_curriculum import problems_from_dataset

    return LocalCurriculum(problems_from_dataset(data), ledger=tmp_path / "ledger.duckdb", weights=weights, seed=0,
                           strategies=StrategyConfig.model_validate(strategies or {}))


def train(tmp_path, data, *, mode: str, rounds: int = 3, steps: int = 4, weights=None, source=None):
    from scalerl.curriculum.strategy_config import ZeroVarianceConfig
    from scalerl.env.adapters.trl_curriculum import CurriculumGRPOTrainer
    from trl import GRPOConfig

    source = source or local_source(tmp_path, data, weights)
    seen = Seen(source)

    class Recording(CurriculumGRPOTrainer):
        def _compute_loss(self, model, inputs):
            seen.losses.append((inputs["advantages"].clone(), inputs["completion_mask"].sum(dim=1)))
            return super()._compute_loss(model, inputs)

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, max_steps=steps, learning_rate=1e-5, seed=0,
        per_device_train_batch_size=GROUPS * GENERATIONS, num_generations=GENERATIONS, max_completion_length=4,
        logging_steps=1, report_to="none", save_strategy="no", bf16=False, dataloader_num_workers=0)
    trainer = Recording(model=certain_policy(), reward_funcs=[seen.reward()], args=args, train_dataset=data,
                        processing_class=tiny_tokenizer(), curriculum=source,
                        zero_variance=ZeroVarianceConfig(mode=mode, max_refill_rounds=rounds))
    trainer.train()
    assert trainer.state.global_step == steps
    return trainer, source, seen


def groups_of(ids: list[str]) -> list[str]:
    assert len(ids) % GENERATIONS == 0
    groups = [ids[i:i + GENERATIONS] for i in range(0, len(ids), GENERATIONS)]
    assert all(len(set(g)) == 1 for g in groups), "a group mixes prompts"
    return [g[0] for g in groups]


def logged(trainer, name: str) -> list[float]:
    return [line[name] for line in trainer.state.log_history if name in line]


def service_source(url: str, data, weights):
    """A set of the server's curriculum holding the dataset's problems (inline records)."""
    from scalerl.env.adapters.curriculum_source import ServiceCurriculum, set_records
    from scalerl.env.adapters.trl_curriculum import problems_from_dataset
    from scalerl.env.curriculum_client import CurriculumClient

    client = CurriculumClient(url, "trl-dropin")
    client.register(records=set_records(problems_from_dataset(data)), domain_weights=weights, seed=0)
    return ServiceCurriculum(client)


@pytest.mark.parametrize("where", ["local", "service"])
def test_refill_retirement_and_weights_on_trainer_side(where, tmp_path, monkeypatch, request):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("SCALERL_REWARD_URL", raising=False)
    data = dataset({"<q0>": 3, "<q1>": 5, "<q2>": 2, "<q3>": 3})
    weights = {"math": 3, "code": 1}
    source = None
    if where == "service":
        from tests.support.server_harness import shared_server

        server = shared_server(request, "rl-curriculum", "--ledger", str(tmp_path / "server.duckdb"))
        source = service_source(server.url, data, weights)
    trainer, source, seen = train(tmp_path, data, mode="refill", weights=weights, source=source)

    drawn, weighted = [], 0
    math = {pid for pid in data["prompt_id"] if pid.startswith(("q0", "q1"))}
    for ids, retired_then in seen.calls:
        groups = groups_of(ids)
        assert not set(groups) & retired_then, "a retired prompt reached the trainer"
        domains = sorted(TAG[f"<{pid.split('-')[0]}>"].domain for pid in groups)
        if len(math - retired_then) >= 3:  # the service draws distinct prompts, so 3:1 needs 3 active math ones
            assert domains == ["code", "math", "math", "math"], f"draws do not follow the weights 3:1: {groups}"
            weighted += 1
        drawn += groups
    assert weighted >= len(seen.calls) // 2
    easy = {f"q0-{i}" for i in range(3)}
    assert easy & set(drawn) and easy & set(drawn) <= source.retired()
    assert all(drawn.count(pid) <= 1 for pid in easy), "an always-solved prompt came back after retiring"
    assert len(seen.calls) > trainer.state.global_step, "no refill round ran"

    assert len(seen.losses) == trainer.state.global_step
    for advantages, tokens in seen.losses:
        assert advantages.shape[0] == GROUPS * GENERATIONS, "the batch is not full"
        assert (advantages != 0).all() and (tokens > 0).all(), "a zero-variance group reached the loss"
    assert sum(logged(trainer, "dynamic_sampling/rounds")) > 0
    assert logged(trainer, "dynamic_sampling/masked_groups") == [0.0] * trainer.state.global_step
    assert logged(trainer, "curriculum/retired")[-1] >= 1


def test_refill_cap_masks_what_it_cannot_replace(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("SCALERL_REWARD_URL", raising=False)
    # Never-solved code prompts and one informative math prompt drawn once per batch (weights 1:3): the first
    # take and one refill round hold at most two informative groups of the four the batch needs.
    data = dataset({"<q1>": 1, "<q2>": 6})
    trainer, _, seen = train(tmp_path, data, mode="refill", rounds=1, steps=2, weights={"math": 1, "code": 3})
    assert len(seen.calls) == 2 * trainer.state.global_step  # the first take and one refill round per step
    masked = logged(trainer, "dynamic_sampling/masked_groups")
    assert masked and all(m >= 2 for m in masked)
    for advantages, tokens in seen.losses:
        assert advantages.shape[0] == GROUPS * GENERATIONS
        assert ((advantages != 0) | (tokens == 0)).all(), "a zero-variance group's tokens reached the loss"
        assert int((tokens == 0).sum()) >= 2 * GENERATIONS


def test_shrink_masks_zero_variance_groups_without_refill(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("SCALERL_REWARD_URL", raising=False)
    data = dataset({"<q1>": 2, "<q2>": 2})
    trainer, _, seen = train(tmp_path, data, mode="shrink", steps=2)
    assert len(seen.calls) == trainer.state.global_step
    for advantages, tokens in seen.losses:
        assert advantages.shape[0] == GROUPS * GENERATIONS
        assert ((advantages != 0) | (tokens == 0)).all()
        assert int((tokens == 0).sum()) >= 2 * GENERATIONS  # the two never-solved prompts' groups


def test_learnability_priority_shapes_the_draws(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("SCALERL_REWARD_URL", raising=False)
    # Code prompts: three never solved (p = 0, weight floor 0.01 once seen) and three half solved (p ~ 1/2,
    # weight ~0.26). Learnability with replacement draws the half-solved ones; uniform would split 1:1.
    data = dataset({"<q1>": 2, "<q2>": 3, "<q3>": 3})
    strategies = {"priority": {"mode": "learnability", "replacement": True}}
    source = local_source(tmp_path, data, {"math": 1, "code": 1}, strategies)
    _, _, seen = train(tmp_path, data, mode="keep", steps=8, source=source)
    code = [pid for ids, _ in seen.calls[1:] for pid in groups_of(ids) if not pid.startswith("q1")]
    assert len(code) >= 12
    assert sum(pid.startswith("q2") for pid in code) / len(code) < 0.25, code
