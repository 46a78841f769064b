"""Validation on the run's own engine (`scalerl.trainer.rollout.side_channel` through `LocalRuntime`), with a real
torch engine standing for the run's engine (the vLLM run of the same path: tests/trainer/test_vllm_validation.py).

Checked: the pass rate is the scripted model's (2 of 3 problems answered right), every sample counted,
groups of at most the engine's slots, validation's groups never reach the scorer (training groups keep
flowing and none carries a validation id), and a version mismatch is refused."""

from __future__ import annotations

import pytest
from scalerl.env.contracts.records import ChatMessage, ProblemRecord, make_prompt_id
from scalerl.trainer.engines.base import GenerationRequest, SamplingParams
from scalerl.trainer.engines.factory import build_torch_engine
from scalerl.trainer.rollout.problems import PromptCodec
from scalerl.trainer.rollout.runtime import LocalRuntime
from scalerl.trainer.run.validation import evaluate
from scalerl.trainer.tiny.model import CharTokenizer
from scalerl.verifiers import VerifierPool

from tests.support.fake_generation import FakeWorker
from tests.support.tiny_policy import scripted_tiny_model, small_train_config

ANSWER = "\\boxed{7}"
SLOTS = 4


class ShortWorker(FakeWorker):
    """Training requests the small engine can hold (FakeWorker's own ask for 256 tokens)."""

    def make_request(self, group_id: int) -> GenerationRequest:
        return GenerationRequest(request_id=f"g{group_id}", prompt_token_ids=[1, 2], samples_per_prompt=2,
                                 sampling=SamplingParams(max_new_tokens=8))


def math_problem(text: str, answer: str) -> ProblemRecord:
    return ProblemRecord(prompt_id=make_prompt_id("t", text), domain="math", source="t",
                         prompt=[ChatMessage(role="user", content=text)], answer=answer)


@pytest.fixture
def runtime():
    cfg = small_train_config(f"engine.max_slots={SLOTS}", "engine.max_seq_len=96")
    model = scripted_tiny_model(ANSWER)
    engine = build_torch_engine(cfg.engine, model, CharTokenizer().eos_token_id, fp32_head=cfg.optim.fp32_head,
                                device="cpu", policy_version=3, seed=0)
    rt = LocalRuntime(engine, ShortWorker(), mode="pipeline", k=1, prompts_per_step=2)
    rt.start(3)
    yield cfg, model, rt
    rt.close()


def test_validation_runs_on_the_runs_engine_beside_training(runtime):
    cfg, model, rt = runtime
    cfg = cfg.model_copy(update={"validation": cfg.validation.model_copy(update={"min_evaluations_per_domain": 14})})
    problems = [math_problem("3+4=", "7"), math_problem("2+5=", "7"), math_problem("4+4=", "8")]
    groups: list[int] = []
    with VerifierPool() as verifier:
        out = evaluate(model, PromptCodec(CharTokenizer()), {"math": problems}, cfg, verifier, device="cpu",
                       policy_version=3, engine=rt.side_channel(SLOTS),
                       record=lambda problem, samples, texts, verdicts: groups.append(len(samples)))
    assert out["heldout/math/n"] == 15  # ceil(14 / 3) = 5 samples of each problem
    assert out["heldout/math/pass_rate"] == pytest.approx(2 / 3)
    assert max(groups) <= SLOTS and sum(groups) == 15
    assert rt.side_channel(SLOTS).num_pending() == 0
    # Training kept its groups, and only its own: a validation group at the scorer has no group id there
    # and fails the runtime, which take_groups would raise.
    taken = rt.take_groups(2, 3, timeout_s=60)
    assert len(taken) == 2 and {g.group_id for g in taken} <= set(range(rt.next_group_id()))
    assert rt.stats().finished_groups >= 2


def test_validation_refuses_an_engine_at_another_version(runtime):
    cfg, model, rt = runtime
    with VerifierPool() as verifier, pytest.raises(RuntimeError, match="version"):
        evaluate(model, PromptCodec(CharTokenizer()), {"math": [math_problem("3+4=", "7")]}, cfg, verifier,
                 device="cpu", policy_version=4, engine=rt.side_channel(SLOTS))
