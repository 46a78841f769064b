"""Settings of the curriculum strategies (`curriculum.*` of `scalerl train`): configuration only.

Every default is ScaleRL's choice (arXiv 2510.13786): zero-variance groups dropped and the batch
shrinks, retirement in the ledger only (pass rate >= 0.9, for good), uniform sampling within a
domain, no pre-rollout skipping, a fixed domain mix, one stage. With every default the sampler runs
exactly the code path it ran before these settings existed (`StrategyConfig.active` is False).
The rules themselves live in `scalerl.curriculum.strategies`; their effect on a run is in docs/curriculum.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator
from scalerl.env.contracts.records import Strict

ZeroVarianceMode = Literal["shrink", "refill", "duplicate", "keep"]
PriorityMode = Literal["uniform", "learnability", "failure", "pools"]


class ZeroVarianceConfig(Strict):
    """What a step does with groups whose rewards are all equal."""

    mode: ZeroVarianceMode = Field(
        default="shrink", description="shrink: drop them, the batch shrinks (ScaleRL); refill: take more groups until "
        "the batch is full of informative ones (DAPO dynamic sampling); duplicate: repeat informative groups to fill "
        "the batch when more than `duplicate_min_fraction` are informative, else skip the step (POLARIS); keep: "
        "train on them (their advantages are 0)")
    max_refill_rounds: int = Field(default=3, ge=1, description="refill: extra takes per step at most")
    refill_timeout_s: float = Field(default=120.0, gt=0, description="refill: wait at most this long per extra take")
    duplicate_min_fraction: float = Field(
        default=1 / 3, ge=0, lt=1, description="duplicate: informative share above which the batch is filled")


class PoolConfig(Strict):
    """One difficulty pool: prompts whose pass rate is <= `max_pass_rate` (and above the previous pool's)."""

    max_pass_rate: float = Field(ge=0, le=1)
    weight: float = Field(ge=0)


def _prime_rl_pools() -> list[PoolConfig]:
    return [PoolConfig(max_pass_rate=0.25, weight=0.2), PoolConfig(max_pass_rate=0.75, weight=1.0),
            PoolConfig(max_pass_rate=1.0, weight=0.2)]


class PriorityConfig(Strict):
    """Which prompt of a domain is drawn next (without replacement within an epoch)."""

    mode: PriorityMode = Field(
        default="uniform", description="uniform: seeded shuffle (ScaleRL); learnability: weight p(1-p); failure: "
        "weight 1-p; pools: the pool weights below split over each pool's prompts")
    replacement: bool = Field(
        default=False, description="false: without replacement within an epoch (the weights order each epoch); true: "
        "every draw weighs all active prompts, so favoured prompts recur within an epoch (as LILO and Kimi sample)")
    window: Literal["all", "group"] = Field(
        default="all", description="pass rate p over every sample of the prompt, or its latest group")
    unseen_pass_rate: float = Field(
        default=0.5, ge=0, le=1, description="p of a prompt without samples and without a profiled prior")
    floor: float = Field(default=0.01, ge=0, description="added to every weight: no prompt is starved for good")
    pools: list[PoolConfig] = Field(default_factory=_prime_rl_pools,
                                    description="pools mode: prime-rl's difficulty_pool (hard/normal/easy)")

    @model_validator(mode="after")
    def _pools_cover(self) -> PriorityConfig:
        bounds = [p.max_pass_rate for p in self.pools]
        if self.mode == "pools" and (not bounds or bounds != sorted(bounds) or bounds[-1] < 1.0):
            raise ValueError("priority.pools need increasing max_pass_rate values ending at 1.0")
        return self


class BenchConfig(Strict):
    """Retirement rules beyond the ledger's: prompts the sampler passes over while the rule holds.

    The ledger's `retirement` (threshold on the latest group or on every sample) stays the permanent
    record; these rules are re-evaluated at every batch, so a benched prompt comes back when its
    counts no longer meet them."""

    last_k: int | None = Field(default=None, ge=1, description="window: the prompt's last k groups (None = off)")
    easy_at: float | None = Field(default=None, gt=0, le=1, description="bench when the window pass rate >= this")
    hard_at: float | None = Field(default=None, ge=0, lt=1,
                                  description="hard side: bench when the window pass rate <= this")
    min_samples: int = Field(default=16, ge=1, description="a window needs this many scored samples")

    @property
    def active(self) -> bool:
        return self.last_k is not None and (self.easy_at is not None or self.hard_at is not None)


class ReadmissionConfig(Strict):
    """Bringing retired prompts back (ScaleRL: never)."""

    mode: Literal["none", "resume_fraction", "probe"] = Field(
        default="none", description="resume_fraction: on each resume queue `fraction` of the retired prompts for "
        "one more group; probe: each draw is a retired prompt with probability `probe_probability`")
    fraction: float = Field(default=0.1, gt=0, le=1, description="resume_fraction: share of the retired prompts")
    queue_every: int = Field(default=4, ge=1, description="resume_fraction: one queued prompt per this many draws")
    probe_probability: float = Field(default=0.02, gt=0, lt=1, description="probe: chance a draw is a retired prompt")


class SkipConfig(Strict):
    """Pre-rollout skipping (GRESO, arXiv 2506.02177): a prompt whose last z groups were all zero-variance
    is skipped with probability 1 - p^z, p adapted per step toward target shares of easy/hard groups."""

    mode: Literal["none", "greso"] = Field(default="none", description="none (ScaleRL) | greso")
    p_initial: float = Field(default=0.5, gt=0, lt=1, description="exploration probability p at the start")
    p_step: float = Field(default=0.01, gt=0, description="change of p per step")
    p_min: float = Field(default=0.05, gt=0, lt=1, description="p never falls below this")
    p_max: float = Field(default=0.95, gt=0, lt=1, description="p never rises above this")
    target_easy: float = Field(default=1 / 12, ge=0, le=1, description="wanted share of all-correct groups")
    target_hard: float = Field(default=1 / 6, ge=0, le=1, description="wanted share of all-wrong groups")


class MixingConfig(Strict):
    """Domain weights: fixed (`data.domain_weights`) or a learning-progress bandit (DUMP-style UCB)."""

    mode: Literal["fixed", "learning_progress"] = Field(
        default="fixed", description="fixed: data.domain_weights (ScaleRL); learning_progress: the bandit below")
    window_groups: int = Field(default=64, ge=1, description="recent groups per domain the progress is measured on")
    ucb: float = Field(default=0.1, ge=0, description="exploration bonus c * sqrt(ln N / n_domain)")
    min_weight: float = Field(default=0.05, gt=0, description="no domain's weight falls below this")


class StageConfig(Strict):
    """One stage of a schedule: it lasts until the sampler has drawn `until_batch` batches.

    The length budgets (None: the run's own `length.*` / `engine.max_new_tokens`) apply to every request
    started while the stage is current; a request in flight at a stage boundary keeps the budget it
    started with. They are resolved and checked against `engine.max_seq_len` by the trainer
    (`scalerl.trainer.core.length_control.stage_length`, `TrainConfig`)."""

    until_batch: int | None = Field(default=None, ge=1, description="None: the last stage, to the end")
    min_prior: float | None = Field(default=None, ge=0, le=1, description="level: prior pass rate >= this")
    max_prior: float | None = Field(default=None, ge=0, le=1, description="level: prior pass rate <= this")
    drop_above: float | None = Field(
        default=None, ge=0, le=1, description="after this stage, bench prompts whose pass rate over the stage's "
        "samples is above this (POLARIS re-filtering: 0.9)")
    think_budget_min_tokens: int | None = Field(
        default=None, ge=1, description="interrupt mode: the stage's length.think_budget_min_tokens (None = the run's)")
    think_budget_max_tokens: int | None = Field(
        default=None, ge=1, description="interrupt mode: the stage's length.think_budget_max_tokens (None = the run's)")
    answer_budget_tokens: int | None = Field(
        default=None, ge=1, description="interrupt mode: the stage's length.answer_budget_tokens (None = the run's)")
    max_new_tokens: int | None = Field(
        default=None, ge=1, description="penalty/none mode: the stage's engine.max_new_tokens, also the penalty's "
        "default L_max (None = the run's)")


class StrategyConfig(Strict):
    """The switchable curriculum strategies (the ledger's `retirement` is configured next to them)."""

    zero_variance: ZeroVarianceConfig = Field(default_factory=ZeroVarianceConfig)
    priority: PriorityConfig = Field(default_factory=PriorityConfig)
    bench: BenchConfig = Field(default_factory=BenchConfig)
    readmission: ReadmissionConfig = Field(default_factory=ReadmissionConfig)
    skip: SkipConfig = Field(default_factory=SkipConfig)
    mixing: MixingConfig = Field(default_factory=MixingConfig)
    stages: list[StageConfig] = Field(
        default_factory=list, description="empty: one stage, no levels, the run's own length budgets; each stage: "
        "until_batch, min_prior/max_prior, drop_above, length budgets (docs/curriculum.md)")
    prior_ledger: str | None = Field(
        default=None, description="a profile ledger (`scalerl profile`): its pass rates are the prior p "
        "of prompts without samples, and the levels of `stages`")

    @model_validator(mode="after")
    def _stages_ordered(self) -> StrategyConfig:
        ends = [s.until_batch for s in self.stages]
        if any(e is None for e in ends[:-1]) or [e for e in ends if e] != sorted(e for e in ends if e):
            raise ValueError("stages: until_batch must increase, and only the last stage may leave it empty")
        if any(s.min_prior is not None or s.max_prior is not None for s in self.stages) and not self.prior_ledger:
            raise ValueError("stages with levels (min_prior/max_prior) need curriculum.prior_ledger")
        return self

    @property
    def sampler_active(self) -> bool:
        """Whether the sampler needs the strategy hook (False: today's code path, unchanged)."""
        return (self.priority.mode != "uniform" or self.bench.active or self.readmission.mode != "none"
                or self.skip.mode != "none" or self.mixing.mode != "fixed" or bool(self.stages)
                or self.prior_ledger is not None)


ABLATE_VARIANTS: dict[str, tuple[str, list[str]]] = {
    "cur-refill": ("zero-variance groups replaced by more groups until the batch is full (DAPO dynamic sampling)",
                   ["curriculum.zero_variance.mode=refill"]),
    "cur-duplicate": ("informative groups repeated to fill the batch, or the step skipped (POLARIS)",
                      ["curriculum.zero_variance.mode=duplicate"]),
    "cur-learnability": ("prompts drawn by learnability p(1-p) (LILO)", ["curriculum.priority.mode=learnability"]),
    "cur-learnability-r": ("prompts drawn by learnability p(1-p), with replacement (recurring within an epoch)",
                           ["curriculum.priority.mode=learnability", "curriculum.priority.replacement=true"]),
    "cur-failure": ("prompts drawn by failure rate 1-p (Kimi k1.5)", ["curriculum.priority.mode=failure"]),
    "cur-pools": ("prompts drawn from difficulty pools (prime-rl difficulty_pool)", ["curriculum.priority.mode=pools"]),
    "cur-greso": ("pre-rollout skipping of zero-variance streaks (GRESO)", ["curriculum.skip.mode=greso"]),
    "cur-bench-hard": ("prompts never solved in their last 2 groups passed over",
                       ["curriculum.bench.last_k=2", "curriculum.bench.hard_at=0.0"]),
    "cur-probe": ("retired prompts re-admitted with probability 0.02 per draw", ["curriculum.readmission.mode=probe"]),
    "cur-lp-mix": ("domain weights by learning progress with a UCB bonus (DUMP)",
                   ["curriculum.mixing.mode=learning_progress"]),
}
"""The strategies as `scalerl ablate` variants: name -> (description, dotted `TrainConfig` overrides)."""
