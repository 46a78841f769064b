"""Per-stage length budgets (`curriculum.stages[i].think_budget_*|answer_budget_tokens|max_new_tokens`): the
requests the rollout worker builds from a real sampler switch budgets at the stage boundary, a group in
flight across the boundary keeps its own (its length penalty too), bad stage budgets are config errors
naming the stage and field, prompts are kept only if they fit every stage, and without stages (or with
stages that set no budget) the requests are exactly today's."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from scalerl.curriculum.ledger.store import Ledger
from scalerl.curriculum.policy import CurriculumPolicy
from scalerl.curriculum.sampler import Sampler
from scalerl.env.contracts.config_loader import ConfigError, load_config
from scalerl.env.contracts.records import ChatMessage, ProblemRecord
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.core.length_control import plan_interruption, stage_length
from scalerl.trainer.engines.base import GeneratedGroup, GeneratedSample
from scalerl.trainer.rollout.problems import DomainPool, PromptCodec
from scalerl.trainer.rollout.prompts import completion_budget, prepare_prompts
from scalerl.trainer.rollout.worker import BatchDrawer, Rollouts
from scalerl.trainer.run.zero_variance import stage_budget_metrics
from scalerl.trainer.tiny.model import CharTokenizer
from scalerl.verifiers import VerifierPool

P = 4  # prompts per step = problems per sampler batch
PROBLEMS = [ProblemRecord(prompt_id=f"p{i:02d}", domain="math", source="t",
                          prompt=[ChatMessage(role="user", content=f"{i}+1=")], answer=str(i + 1)) for i in range(24)]
TWO_STAGES = ("curriculum.stages=[{until_batch: 2, think_budget_min_tokens: 5, think_budget_max_tokens: 6, "
              "answer_budget_tokens: 3}, {think_budget_min_tokens: 30, think_budget_max_tokens: 30}]")


@pytest.fixture(scope="module")
def verifier():
    pool = VerifierPool()
    yield pool
    pool.close()


def config(*overrides: str) -> TrainConfig:
    return load_config(TrainConfig, None, [f"pipeline.prompts_per_step={P}", *overrides])


def rollouts(cfg: TrainConfig, verifier=None) -> Rollouts:
    """The worker fed the way `setup_run` feeds it: a real sampler (with the stages' policy) in batches."""
    policy = CurriculumPolicy(cfg.curriculum, seed=0) if cfg.curriculum.sampler_active else None
    draw = BatchDrawer(Sampler(PROBLEMS, weights={"math": 1}, seed=0, policy=policy), P, cfg.curriculum.stages)
    return Rollouts(cfg, PromptCodec(CharTokenizer()), draw, verifier, seed=0, stage=draw.stage)


def test_the_budget_of_requests_switches_at_the_stage_boundary():
    worker = rollouts(config(TWO_STAGES))
    plans = [worker.make_request(g).interruption for g in range(4 * P)]
    first, later = plans[:2 * P], plans[2 * P:]  # batches 0 and 1 are drawn in stage 0
    assert {p.think_budget_tokens for p in first} <= {5, 6} and {p.answer_budget_tokens for p in first} == {3}
    assert {p.think_budget_tokens for p in later} == {30} and {p.answer_budget_tokens for p in later} == {16}
    assert len({p.think_budget_tokens for p in first}) == 2, "the budget is still drawn within the stage's range"


def test_without_stages_or_stage_budgets_the_requests_are_todays():
    plain, no_budgets = config(), config("curriculum.stages=[{until_batch: 1}, {}]")
    for cfg in (plain, no_budgets):
        worker = rollouts(cfg)
        for g in range(3 * P):
            request = worker.make_request(g)
            want = plan_interruption(cfg.length, random.Random(f"0/{g}"), phrase_token_ids=worker._phrase)
            assert request.interruption == want and request.sampling.max_new_tokens == cfg.engine.max_new_tokens
    length, max_new = stage_length(plain.length, 64, no_budgets.curriculum.stages[0])
    assert length is plain.length and max_new == 64, "a stage without budgets resolves to the run's own objects"
    assert completion_budget(no_budgets) == completion_budget(plain)


def sample(codec: PromptCodec, text: str) -> GeneratedSample:
    n = len(text)
    return GeneratedSample(sample_index=0, token_ids=codec.tokenizer.encode(text), logprobs=[-1.0] * n,
                           policy_versions=[0] * n, loss_mask=[1] * n, finish_reason="stop")


def test_a_group_in_flight_across_the_boundary_keeps_its_budget_and_penalty(verifier):
    cfg = config("length.mode=penalty", "engine.max_new_tokens=20",
                 "curriculum.stages=[{until_batch: 1, max_new_tokens: 10}, {}]")
    worker = rollouts(cfg, verifier)
    early = worker.make_request(0)
    later = [worker.make_request(g) for g in range(1, 2 * P)]  # the sampler has moved on to stage 1
    assert early.sampling.max_new_tokens == 10 and later[-1].sampling.max_new_tokens == 20
    text = "x" * 9  # 9 tokens: past stage 0's L_max - L_cache = 10 - 2, well inside stage 1's 20 - 4
    scored = {r.request_id: worker.score(GeneratedGroup(request=r, samples=[sample(worker.codec, text)]), 0, 0.0)
              for r in (early, later[-1])}
    assert scored[early.request_id].length_penalties == pytest.approx([-0.5])  # (8 - 9) / 2
    assert scored[later[-1].request_id].length_penalties == [0.0]


@pytest.mark.parametrize(("stages", "message"), [
    ("[{until_batch: 2, think_budget_max_tokens: 30}, {}]",
     "length.think_budget_min_tokens=40 exceeds curriculum.stages[0].think_budget_max_tokens=30"),
    ("[{until_batch: 2}, {think_budget_min_tokens: 150, think_budget_max_tokens: 150}]",
     "curriculum.stages[1]: completion budget 167 (curriculum.stages[1].think_budget_max_tokens + "
     "length.answer_budget_tokens) leaves no room for a prompt in engine.max_seq_len=160"),
])
def test_bad_stage_budgets_are_config_errors_naming_stage_and_field(stages, message):
    with pytest.raises(ConfigError) as err:
        config(f"curriculum.stages={stages}")
    assert message in str(err.value)


def test_stage_sampling_budgets_are_checked_against_the_penalty_and_the_sequence():
    with pytest.raises(ConfigError, match=r"length.max_response_tokens=16 exceeds curriculum.stages\[0\]."
                                          r"max_new_tokens=12"):
        config("length.mode=penalty", "length.max_response_tokens=16",
               "curriculum.stages=[{until_batch: 1, max_new_tokens: 12}, {}]")
    with pytest.raises(ConfigError, match=r"curriculum.stages\[1\]: completion budget 160 \(curriculum.stages\[1\]."
                                          r"max_new_tokens\)"):
        config("length.mode=none", "curriculum.stages=[{until_batch: 1}, {max_new_tokens: 160}]")


def test_prompts_must_fit_the_largest_stage_budget():
    cfg = config("curriculum.stages=[{until_batch: 1}, {think_budget_min_tokens: 80, think_budget_max_tokens: 100}]")
    assert completion_budget(cfg, PromptCodec(CharTokenizer())) == 100 + len(cfg.length.interruption_phrase) + 16
    long = ProblemRecord(prompt_id="long", domain="math", source="t", answer="1",
                         prompt=[ChatMessage(role="user", content="1" * 40 + "=")])
    pools = {"math": DomainPool(train=PROBLEMS[:3] + [long], holdout=PROBLEMS[3:5])}
    _, kept, skipped = prepare_prompts(cfg, CharTokenizer(), pools)
    assert skipped == {"math": 1} and "long" not in {p.prompt_id for p in kept["math"].train}
    assert "long" in {p.prompt_id for p in prepare_prompts(config(), CharTokenizer(), pools)[1]["math"].train}
    with pytest.raises(ConfigError, match=r"completion budget 129 of curriculum.stages\[1\]"):
        prepare_prompts(cfg, CharTokenizer(), {"math": DomainPool(train=[long], holdout=PROBLEMS[3:5])})


def test_the_logged_budgets_are_the_stages():
    cfg = config(TWO_STAGES)
    assert stage_budget_metrics(cfg, 0) == {"curriculum/budget/think_min": 5.0, "curriculum/budget/think_max": 6.0,
                                            "curriculum/budget/answer": 3.0}
    assert stage_budget_metrics(cfg, 1)["curriculum/budget/think_max"] == 30.0
    penalty = config("length.mode=penalty", "curriculum.stages=[{until_batch: 1, max_new_tokens: 10}, {}]")
    assert stage_budget_metrics(penalty, 0) == {"curriculum/budget/max_new_tokens": 10.0,
                                                "curriculum/budget/penalty_l_max": 10.0}
    assert stage_budget_metrics(penalty, 1)["curriculum/budget/max_new_tokens"] == 64.0


def test_the_documented_stage_schedule_is_a_valid_config(tmp_path):
    doc = (Path(__file__).resolve().parents[3] / "docs" / "curriculum.md").read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", doc, flags=re.DOTALL) if "stages:" in b]
    (tmp_path / "stages.yaml").write_text(block)
    cfg = load_config(TrainConfig, tmp_path / "stages.yaml", [])
    assert [s.think_budget_max_tokens for s in cfg.curriculum.stages] == [7000, 14000, None]
    assert completion_budget(cfg) < cfg.engine.max_seq_len


def test_a_resumed_run_continues_in_the_stage_it_reached(tmp_path):
    cfg = config(TWO_STAGES)
    with Ledger(tmp_path / "ledger.duckdb") as ledger:
        ledger.upsert_problems(PROBLEMS)

        def worker() -> Rollouts:
            sampler = Sampler(PROBLEMS, weights={"math": 1}, seed=0, ledger=ledger,
                              policy=CurriculumPolicy(cfg.curriculum, seed=0))
            draw = BatchDrawer(sampler, P, cfg.curriculum.stages)
            return Rollouts(cfg, PromptCodec(CharTokenizer()), draw, None, seed=0, stage=draw.stage)

        first = worker()
        assert {first.make_request(g).interruption.answer_budget_tokens for g in range(2 * P)} == {3}
        resumed = worker()  # the sampler state (2 batches drawn) comes back from the ledger
        assert resumed.make_request(2 * P).interruption.think_budget_tokens == 30
