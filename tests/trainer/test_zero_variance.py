"""The loop's zero-variance phases (`scalerl.trainer.run.zero_variance`) under each mode, on hand-made scored
groups: the default keeps exactly what the ScaleRL filter keeps, in order; duplicates are new groups;
refill takes more (the loop records them with the step's own groups)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from scalerl.curriculum.filters import zero_variance_filter
from scalerl.env.contracts.config_loader import ConfigError, load_config
from scalerl.env.contracts.records import Verdict
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.engines.base import GeneratedSample
from scalerl.trainer.rollout.messages import RolloutGroup
from scalerl.trainer.run.setup import sampler_policy
from scalerl.trainer.run.zero_variance import curriculum_metrics, filter_zero_variance, refill_groups

from tests.support.ledger_data import problem

P = 4


def rollout(gid: int, passed: int, n: int = 4) -> RolloutGroup:
    sample = GeneratedSample(sample_index=0, token_ids=[1], logprobs=[0.0], policy_versions=[0], loss_mask=[1],
                             finish_reason="stop")
    return RolloutGroup(group_id=gid, problem=problem(gid, "math"), prompt_token_ids=[1], samples=[sample] * n,
                        completions=["x"] * n, verdicts=[Verdict.of("correct" if i < passed else "wrong")
                                                         for i in range(n)],
                        submitted_version=0, submitted_at=0.0, finished_at=0.0)


def fake_run(*overrides: str, more: list[list[RolloutGroup]] | None = None) -> SimpleNamespace:
    cfg = load_config(TrainConfig, None, [f"pipeline.prompts_per_step={P}", *overrides])
    queue = list(more or [])
    runtime = SimpleNamespace(taken=[], credited=[], credit_admission=lambda n: runtime.credited.append(n),
                              take_extra_groups=lambda n, timeout: runtime.taken.append(n) or queue.pop(0)[:n])
    return SimpleNamespace(cfg=cfg, runtime=runtime, trainer=SimpleNamespace(policy_version=3),
                           sampler=SimpleNamespace(policy=sampler_policy(cfg)))


GROUPS = [rollout(0, 2), rollout(1, 4), rollout(2, 0), rollout(3, 1)]  # two informative, two zero-variance


def test_default_mode_keeps_exactly_what_the_scalerl_filter_keeps():
    run = fake_run()
    assert run.sampler.policy is None  # ScaleRL defaults: the sampler's plain walk
    kept, zero_var = filter_zero_variance(run, GROUPS)
    assert kept == zero_variance_filter(GROUPS)[0] and [g.group_id for g in kept] == [0, 3]
    assert zero_var == {1, 2}
    assert refill_groups(run, GROUPS) == []
    metrics = curriculum_metrics(run, GROUPS, kept)
    assert metrics == {"curriculum/dropped": 2.0, "curriculum/refilled": 0.0, "curriculum/duplicated": 0.0,
                       "curriculum/skipped_step": 0.0, "curriculum/trained_groups": 2.0}


def test_keep_trains_on_every_group_and_the_old_switch_says_what_replaced_it():
    kept, zero_var = filter_zero_variance(fake_run("curriculum.zero_variance.mode=keep"), GROUPS)
    assert kept == GROUPS and zero_var == {1, 2}
    with pytest.raises(ConfigError, match="zero_variance.mode=keep"):
        fake_run("curriculum.zero_variance_filter=false")


def test_refill_needs_the_in_process_runtime():
    with pytest.raises(ConfigError, match="refill needs the in-process runtime"):
        fake_run("curriculum.zero_variance.mode=refill", "ray.enabled=true")


def test_duplicate_fills_with_new_groups_or_skips():
    run = fake_run("curriculum.zero_variance.mode=duplicate")
    kept, _ = filter_zero_variance(run, GROUPS)  # 2 of 4 informative: more than a third
    assert [g.group_id for g in kept] == [0, 3, -1, -2] and kept[2].verdicts == GROUPS[0].verdicts
    assert curriculum_metrics(run, GROUPS, kept)["curriculum/duplicated"] == 2.0
    kept, _ = filter_zero_variance(run, [rollout(0, 2), rollout(1, 4), rollout(2, 0), rollout(3, 0)])
    assert kept == []


def test_refill_takes_and_credits_the_missing_groups():
    run = fake_run("curriculum.zero_variance.mode=refill",
                   more=[[rollout(10, 4), rollout(11, 3)], [rollout(12, 1)]])
    extra = refill_groups(run, GROUPS)
    assert run.runtime.taken == run.runtime.credited == [2, 1]  # 2 missing, then 1 (group 10 was zero-variance)
    assert [g.group_id for g in extra] == [10, 11, 12]
    groups = GROUPS + extra
    kept, _ = filter_zero_variance(run, groups)
    assert [g.group_id for g in kept] == [0, 3, 11, 12]
    assert curriculum_metrics(run, groups, kept)["curriculum/refilled"] == 3.0


class _Engine:
    """Finishes every submitted request at the next poll (one 1-token sample per request sample)."""

    policy_version = 0
    stats = SimpleNamespace(busy_s=0.0, idle_s=0.0, sampled_tokens=0)

    def __init__(self) -> None:
        self.queue: list = []

    def submit(self, request) -> None:
        self.queue.append(request)

    def poll(self, timeout_s: float = 0.0) -> list:
        import time

        from scalerl.trainer.engines.base import GeneratedGroup

        out, self.queue = self.queue, []
        if not out:
            time.sleep(timeout_s)
        return [GeneratedGroup(request=r, samples=rollout(0, 0).samples[:1]) for r in out]

    def update_weights(self, weights, version) -> None:
        self.policy_version = version

    def close(self) -> None:
        pass


class _Worker:
    def make_request(self, gid: int):
        from scalerl.trainer.engines.base import GenerationRequest

        return GenerationRequest(request_id=f"g{gid}", prompt_token_ids=[1], samples_per_prompt=1)

    def score(self, generated, version: int, submitted_at: float) -> RolloutGroup:
        gid = int(generated.request.request_id[1:])
        return rollout(gid, gid % 2).model_copy(update={"submitted_version": version})


def test_refill_on_the_in_process_runtime_keeps_the_pipeline_fed():
    """take_extra_groups + credit_admission on a real LocalRuntime (PipelineRL-2): every step still gets its
    share, the extra groups are the oldest scored ones, and the generator replaces them."""
    from scalerl.trainer.rollout.runtime import LocalRuntime

    runtime = LocalRuntime(_Engine(), _Worker(), mode="pipeline", k=2, prompts_per_step=P)
    runtime.start(0)
    try:
        for version in range(6):
            batch = runtime.take_groups(P, version, timeout_s=10)
            runtime.credit_admission(2)
            extra = runtime.take_extra_groups(2, timeout_s=10)
            assert max(g.group_id for g in batch) < min(g.group_id for g in extra)
            runtime.push_weights({}, version + 1)
        assert runtime.stats().taken_groups == 6 * (P + 2)
    finally:
        runtime.close()


def test_a_profile_ledger_becomes_the_samplers_prior(tmp_path):
    from scalerl.curriculum.ledger.retirement import RetirementConfig
    from scalerl.curriculum.ledger.store import Ledger

    path = tmp_path / "profile.duckdb"
    with Ledger(path, retirement=RetirementConfig(enabled=False)) as led:
        led.record_attempts([{"prompt_id": pid, "domain": "math", "sample_index": i,
                              "status": "correct" if i < n else "wrong"}
                             for pid, n in (("a", 2), ("b", 8)) for i in range(8)])
    run = fake_run(f"curriculum.prior_ledger={path}", "curriculum.priority.mode=learnability")
    assert run.sampler.policy.prior == {"a": 0.25, "b": 1.0}
