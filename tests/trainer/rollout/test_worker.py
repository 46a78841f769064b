"""The rollout worker's scoring: verdicts from the real verifier pool, and DAPO's overlong penalty
shaping the rewards the step trains on when `length.mode=penalty` (and only then)."""

from __future__ import annotations

import pytest
from scalerl.env.contracts.config_loader import load_config
from scalerl.env.contracts.records import ChatMessage, ProblemRecord
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.engines.base import GeneratedGroup, GeneratedSample, GenerationRequest
from scalerl.trainer.rollout.problems import PromptCodec
from scalerl.trainer.rollout.worker import Rollouts
from scalerl.trainer.tiny.model import CharTokenizer
from scalerl.verifiers import VerifierPool

PROBLEM = ProblemRecord(prompt_id="p1", domain="math", source="t", prompt=[ChatMessage(role="user", content="1+1=")],
                        answer="2")


@pytest.fixture(scope="module")
def verifier():
    pool = VerifierPool()
    yield pool
    pool.close()


def scored(verifier, overrides: list[str], texts: list[str]):
    cfg = load_config(TrainConfig, None, ["engine.max_new_tokens=20", *overrides])
    codec = PromptCodec(CharTokenizer())
    rollouts = Rollouts(cfg, codec, lambda: PROBLEM, verifier, seed=0)
    request = rollouts.make_request(0)
    samples = [GeneratedSample(sample_index=i, token_ids=codec.tokenizer.encode(t), logprobs=[-1.0] * len(t),
                               policy_versions=[0] * len(t), loss_mask=[1] * len(t), finish_reason="stop")
               for i, t in enumerate(texts)]
    group = GeneratedGroup(request=GenerationRequest(request_id=request.request_id, prompt_token_ids=[1],
                                                     samples_per_prompt=len(texts), sampling=request.sampling),
                           samples=samples)
    return rollouts.score(group, submitted_version=0, submitted_at=0.0)


TEXTS = ["\\boxed{2}", "\\boxed{3}", "x" * 11 + "\\boxed{2}", "x" * 9 + "\\boxed{3}"]
# 9, 9, 20 and 18 tokens (one per character); L_max = max_new_tokens = 20, L_cache = 20 / 5 = 4


def test_penalty_mode_shapes_the_training_rewards_but_not_the_verdicts(verifier):
    group = scored(verifier, ["length.mode=penalty"], TEXTS)
    assert [v.status.value for v in group.verdicts] == ["correct", "wrong", "correct", "wrong"]
    assert [v.reward for v in group.verdicts] == [1.0, 0.0, 1.0, 0.0]
    assert group.rewards == pytest.approx([1.0, 0.0, 0.0, -0.5])  # (16 - 20) / 4 = -1, (16 - 18) / 4 = -0.5


def test_penalty_can_apply_to_correct_samples_only(verifier):
    group = scored(verifier, ["length.mode=penalty", "length.penalty_applies_to=correct"], TEXTS)
    assert group.rewards == pytest.approx([1.0, 0.0, 0.0, 0.0])  # only the correct long one


def test_interrupt_mode_trains_on_the_verdict_rewards(verifier):
    group = scored(verifier, [], TEXTS)
    assert group.length_penalties is None and group.rewards == [1.0, 0.0, 1.0, 0.0]
