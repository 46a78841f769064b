"""Validation with `engine.name=vllm` runs on the run's vLLM engine (real vLLM, CPU build), beside training.

`scalerl.trainer.run.validation.validation_engine` gives `evaluate` the runtime's side channel of that engine
(no second vLLM instance, no torch engine): the scripted model's pass rate comes back exactly (2 of 3
problems), in groups of at most the engine's slots, with every sampled token at the run's policy
version, while the runtime's training groups keep flowing; the memory plan has no validation term.
One engine start (~40 s on CPU) for the whole test.
"""

from __future__ import annotations

import pytest

pytest.importorskip("vllm", reason="the vLLM tests run in .venv-vllm (make test-vllm)")

from scalerl.trainer.engines.vllm_engine import VLLMEngine
from scalerl.trainer.memory.plan import build_plan
from scalerl.trainer.memory.shapes import ModelShape
from scalerl.trainer.rollout.problems import PromptCodec
from scalerl.trainer.rollout.runtime import LocalRuntime
from scalerl.trainer.run.validation import evaluate, validation_engine
from scalerl.trainer.tiny.model import CharTokenizer, save_tiny
from scalerl.verifiers import VerifierPool

from tests.support.tiny_policy import scripted_tiny_model, small_train_config
from tests.trainer.rollout.test_side_channel import ANSWER, ShortWorker, math_problem

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(600)]
SLOTS = 4


def test_vllm_validation_uses_the_runs_engine(tmp_path):
    tok = CharTokenizer()
    model = scripted_tiny_model(ANSWER)
    cfg = small_train_config("engine.name=vllm", f"engine.max_slots={SLOTS}", "engine.max_seq_len=96",
                             "validation.min_evaluations_per_domain=14")
    engine = VLLMEngine(save_tiny(tmp_path / "m", model, tok), eos_token_id=tok.eos_token_id, max_slots=SLOTS,
                        max_seq_len=96, policy_version=2, kv_cache_gib=1)
    rt = LocalRuntime(engine, ShortWorker(), mode="pipeline", k=1, prompts_per_step=2)
    problems = [math_problem("3+4=", "7"), math_problem("2+5=", "7"), math_problem("4+4=", "8")]
    groups, versions = [], set()

    def record(problem, samples, texts, verdicts):
        groups.append(len(samples))
        versions.update(v for s in samples for v in s.policy_versions)

    try:
        rt.start(2)
        channel = validation_engine(cfg, rt)
        assert channel is rt.side_channel(SLOTS)
        with VerifierPool() as verifier:
            out = evaluate(model, PromptCodec(tok), {"math": problems}, cfg, verifier, device="cpu",
                           policy_version=2, engine=channel, record=record)
        taken = rt.take_groups(2, 2, timeout_s=120)  # training's groups, scored while validation ran
    finally:
        rt.close()
    assert out["heldout/math/n"] == 15 and out["heldout/math/pass_rate"] == pytest.approx(2 / 3)
    assert max(groups) <= SLOTS and sum(groups) == 15 and versions == {2}
    assert len(taken) == 2
    shape = ModelShape.from_dict(model.config.to_dict())
    assert not [t for t in build_plan(shape, cfg.plan_inputs()).terms if t.name == "validation engine"]
