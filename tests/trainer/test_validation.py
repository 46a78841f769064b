"""`scalerl.trainer.run.validation.evaluate` on the built-in tiny model with the real verifier pool: its keys, its
sample counts, greedy keys only when asked, and a pass rate equal to correct/total on a handmade case."""

from __future__ import annotations

import math

import pytest
from scalerl.env.contracts.records import ChatMessage, ProblemRecord, make_prompt_id
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.rollout.problems import PromptCodec
from scalerl.trainer.run.data_sources import build_data
from scalerl.trainer.run.validation import evaluate
from scalerl.trainer.tiny.model import CharTokenizer, build_tiny_model
from scalerl.verifiers import VerifierPool

from tests.support.tiny_policy import SMALL_MODEL, scripted_tiny_model, small_train_config

ANSWER = "\\boxed{7}"


@pytest.fixture(scope="module")
def verifier():
    pool = VerifierPool()
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def holdout():
    """Three procedural held-out problems per domain (`scalerl.trainer.run.data_sources.build_data`)."""
    pools = build_data(TrainConfig.model_validate({"data": {"generated_per_domain": 40, "holdout_fraction": 0.1,
                                                            "holdout_max_prompts": 3}}))
    return {d: pool.holdout for d, pool in pools.items()}


@pytest.fixture(scope="module")
def random_model():
    return build_tiny_model(SMALL_MODEL, CharTokenizer())


def math_problem(text: str, answer: str) -> ProblemRecord:
    return ProblemRecord(prompt_id=make_prompt_id("t", text), domain="math", source="t",
                         prompt=[ChatMessage(role="user", content=text)], answer=answer)


def run(model, holdout, verifier, *overrides, record=None):
    cfg = small_train_config(*overrides)
    return evaluate(model, PromptCodec(CharTokenizer()), holdout, cfg, verifier, device="cpu", policy_version=0,
                    record=record)


@pytest.mark.parametrize("min_evaluations", [1, 4, 7])
def test_reports_pass_rate_and_sample_count_per_domain(random_model, holdout, verifier, min_evaluations):
    out = run(random_model, holdout, verifier, f"validation.min_evaluations_per_domain={min_evaluations}")
    assert set(out) == {"validation_s"} | {f"heldout/{d}/{k}" for d in holdout for k in ("pass_rate", "n")}
    for domain, problems in holdout.items():
        assert len(problems) == 3
        assert out[f"heldout/{domain}/n"] == math.ceil(min_evaluations / len(problems)) * len(problems)
        assert 0.0 <= out[f"heldout/{domain}/pass_rate"] <= 1.0


def test_greedy_pass_rates_are_reported_when_asked(random_model, holdout, verifier):
    out = run(random_model, holdout, verifier, "validation.greedy=true", "validation.min_evaluations_per_domain=1")
    for domain in holdout:
        assert 0.0 <= out[f"heldout/{domain}/greedy_pass_rate"] <= 1.0
    assert set(out) == {"validation_s"} | {f"heldout/{d}/{k}" for d in holdout
                                           for k in ("pass_rate", "n", "greedy_pass_rate")}


def test_record_sees_every_sampled_group(random_model, holdout, verifier):
    seen = []
    run(random_model, holdout, verifier, "validation.min_evaluations_per_domain=5",
        record=lambda problem, samples, texts, verdicts: seen.append((problem.prompt_id, len(samples), len(texts),
                                                                      len(verdicts))))
    expected = sorted((p.prompt_id, 2, 2, 2) for problems in holdout.values() for p in problems)
    assert sorted(seen) == expected


def test_scripted_model_emits_its_answer(verifier):
    texts = []
    holdout = {"math": [math_problem("3+4=", "7")]}
    run(scripted_tiny_model(ANSWER), holdout, verifier, record=lambda p, s, t, v: texts.extend(t))
    assert texts == [ANSWER] * 4


def test_pass_rate_is_correct_over_total(verifier):
    """A model that always answers 7, on problems two thirds of which have answer 7."""
    problems = [math_problem("3+4=", "7"), math_problem("2+5=", "7"), math_problem("4+4=", "8")]
    items = [p.verify_item(ANSWER, id=str(i)) for i, p in enumerate(problems)]
    expected = sum(v.correct for v in verifier.verify_batch(items)) / len(problems)
    assert expected == pytest.approx(2 / 3)
    out = run(scripted_tiny_model(ANSWER), {"math": problems}, verifier, "validation.min_evaluations_per_domain=7",
              "validation.greedy=true")
    assert out["heldout/math/n"] == 9
    assert out["heldout/math/pass_rate"] == pytest.approx(expected)
    assert out["heldout/math/greedy_pass_rate"] == pytest.approx(expected)
