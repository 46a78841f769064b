"""The curriculum strategies as pure functions over pass-rate counts, each family in a registry.

Every function here takes numbers (counts, pass rates, flags, a seed) and returns a decision; none
reads the ledger, the clock or global randomness, so each is tested on hand-made inputs and the
same inputs always give the same decision. `scalerl.curriculum.ledger.counts` turns a ledger into these
inputs (SQL over `attempts`), `scalerl.curriculum.policy` applies the decisions in the sampler, and
`scalerl.trainer.run.zero_variance` applies the zero-variance modes in the training loop.

Registries (name -> function): `ZERO_VARIANCE_MODES`, `PRIORITIES`, `SKIPS`, `MIXINGS`.
Not guaranteed: that a strategy helps; docs/curriculum.md says where each comes from and what the
measured study on this project's CPU default could and could not show.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from scalerl.curriculum.strategy_config import (
    BenchConfig,
    MixingConfig,
    PoolConfig,
    PriorityConfig,
    SkipConfig,
    StageConfig,
)


# ------------------------------------------------------------------------------------ zero variance
@dataclass(frozen=True)
class BatchPlan:
    """What a step trains on: indices of kept groups (in order), indices to train twice (duplicates),
    and how many more informative groups to take (refill)."""

    keep: list[int]
    duplicate: list[int] = field(default_factory=list)
    want_more: int = 0
    skipped_step: bool = False


def plan_shrink(informative: Sequence[bool], target: int, min_fraction: float) -> BatchPlan:
    """ScaleRL: drop the zero-variance groups; the batch shrinks."""
    return BatchPlan(keep=[i for i, ok in enumerate(informative) if ok])


def plan_keep(informative: Sequence[bool], target: int, min_fraction: float) -> BatchPlan:
    """Train on every group (a zero-variance group's advantages are 0)."""
    return BatchPlan(keep=list(range(len(informative))))


def plan_refill(informative: Sequence[bool], target: int, min_fraction: float) -> BatchPlan:
    """DAPO dynamic sampling: keep the informative groups and ask for as many more as are missing."""
    keep = [i for i, ok in enumerate(informative) if ok]
    return BatchPlan(keep=keep, want_more=max(0, target - len(keep)))


def plan_duplicate(informative: Sequence[bool], target: int, min_fraction: float) -> BatchPlan:
    """POLARIS: when more than `min_fraction` of the groups are informative, repeat informative groups
    (cyclically, in order) until the batch holds `target`; otherwise skip the step."""
    keep = [i for i, ok in enumerate(informative) if ok]
    if not informative or len(keep) <= min_fraction * len(informative):
        return BatchPlan(keep=[], skipped_step=True)
    missing = max(0, target - len(keep))
    return BatchPlan(keep=keep, duplicate=[keep[j % len(keep)] for j in range(missing)])


ZERO_VARIANCE_MODES: dict[str, Callable[[Sequence[bool], int, float], BatchPlan]] = {
    "shrink": plan_shrink, "keep": plan_keep, "refill": plan_refill, "duplicate": plan_duplicate,
}


# ------------------------------------------------------------------------------------ priority
def weight_uniform(p: float) -> float:
    return 1.0


def weight_learnability(p: float) -> float:
    """LILO-style learnability p(1 - p): largest at p = 0.5, zero for solved or hopeless prompts."""
    return p * (1.0 - p)


def weight_failure(p: float) -> float:
    """Kimi k1.5's failure rate 1 - p: the less often solved, the more often drawn."""
    return 1.0 - p


PRIORITIES: dict[str, Callable[[float], float]] = {
    "uniform": weight_uniform, "learnability": weight_learnability, "failure": weight_failure,
}


def pool_of(p: float, pools: Sequence[PoolConfig]) -> int:
    """Index of the first pool whose max_pass_rate >= p."""
    for i, pool in enumerate(pools):
        if p <= pool.max_pass_rate:
            return i
    return len(pools) - 1


def priority_weights(rates: Mapping[str, float], cfg: PriorityConfig) -> dict[str, float]:
    """Draw weight per prompt from its pass rate p (`floor` added to every weight). Pools: each pool's
    weight is split equally over the pool's prompts (prime-rl picks a pool by weight, then a prompt)."""
    if cfg.mode == "pools":
        members = [pool_of(p, cfg.pools) for p in rates.values()]
        sizes = [members.count(i) for i in range(len(cfg.pools))]
        return {pid: cfg.pools[m].weight / sizes[m] + cfg.floor for pid, m in zip(rates, members)}
    fn = PRIORITIES[cfg.mode]
    return {pid: fn(p) + cfg.floor for pid, p in rates.items()}


def pass_rate_estimate(correct: int, scored: int, prior: float | None, unseen: float) -> float:
    """The p a priority uses: observed when there are samples, else the profiled prior, else `unseen`."""
    if scored > 0:
        return correct / scored
    return unseen if prior is None else prior


def weighted_pick(candidates: Sequence[str], weights: Mapping[str, float], rng: random.Random) -> str:
    """One candidate with probability proportional to its weight (uniform when every weight is 0)."""
    w = [max(0.0, weights.get(c, 0.0)) for c in candidates]
    total = sum(w)
    if total <= 0:
        return candidates[rng.randrange(len(candidates))]
    x, acc = rng.random() * total, 0.0
    for c, wi in zip(candidates, w):
        acc += wi
        if x < acc:
            return c
    return candidates[-1]


# ------------------------------------------------------------------------------------ retirement extras
def benched(window: tuple[int, int] | None, cfg: BenchConfig) -> str | None:
    """'easy' / 'hard' when a prompt's last-k window (correct, scored) meets a bench rule, else None."""
    if not cfg.active or window is None:
        return None
    correct, scored = window
    if scored < cfg.min_samples:
        return None
    rate = correct / scored
    if cfg.easy_at is not None and rate >= cfg.easy_at:
        return "easy"
    if cfg.hard_at is not None and rate <= cfg.hard_at:
        return "hard"
    return None


def readmitted_on_resume(retired: Sequence[str], fraction: float, seed: int, resume_index: int) -> list[str]:
    """A seeded `fraction` (rounded up) of the retired prompts, in a seeded order; a new draw per resume."""
    if not retired:
        return []
    n = math.ceil(fraction * len(retired))
    return random.Random(f"{seed}:readmit:{resume_index}").sample(sorted(retired), n)


# ------------------------------------------------------------------------------------ pre-rollout skipping
def greso_probabilities(steps: Sequence[tuple[int, int, int]], cfg: SkipConfig) -> tuple[float, float]:
    """(p_easy, p_hard) after replaying GRESO's per-step update over `steps` = [(all_correct groups,
    all_wrong groups, groups)] in step order: with the cumulative shares so far, p moves down by
    `p_step` when its share is at or above target (skip more), else up (skip less), within [p_min, p_max]."""
    p_easy = p_hard = cfg.p_initial
    easy = hard = total = 0
    for all_correct, all_wrong, groups in steps:
        easy, hard, total = easy + all_correct, hard + all_wrong, total + groups
        if total == 0:
            continue
        p_easy = _nudge(p_easy, easy / total >= cfg.target_easy, cfg)
        p_hard = _nudge(p_hard, hard / total >= cfg.target_hard, cfg)
    return p_easy, p_hard


def _nudge(p: float, over_target: bool, cfg: SkipConfig) -> float:
    return max(p - cfg.p_step, cfg.p_min) if over_target else min(p + cfg.p_step, cfg.p_max)


def greso_skip_probability(streak: int, easy: bool, p_easy: float, p_hard: float) -> float:
    """Probability of skipping a prompt whose last `streak` groups were all zero-variance (all correct
    when `easy`): 1 - p^streak, so a prompt with no streak is never skipped."""
    return 1.0 - (p_easy if easy else p_hard) ** streak if streak > 0 else 0.0


def skip_none(streak: int, easy: bool, p_easy: float, p_hard: float) -> float:
    return 0.0


SKIPS: dict[str, Callable[[int, bool, float, float], float]] = {"none": skip_none, "greso": greso_skip_probability}


# ------------------------------------------------------------------------------------ domain mixing
def fixed_mix(base: Mapping[str, float], progress: Mapping[str, tuple[float, int]], cfg: MixingConfig) -> dict:
    return dict(base)


def learning_progress_mix(base: Mapping[str, float], progress: Mapping[str, tuple[float, int]],
                          cfg: MixingConfig) -> dict[str, float]:
    """Per domain: mean 2p(1-p) over its recent groups (= mean |advantage| of 0/1 rewards, DUMP) plus
    a UCB bonus c * sqrt(ln N / n); a domain without groups yet gets its base weight. Scaled by the
    base weight and floored at `min_weight`."""
    total = sum(n for _, n in progress.values())
    out = {}
    for domain, w in base.items():
        lp, n = progress.get(domain, (0.0, 0))
        if n == 0:
            out[domain] = w
            continue
        bonus = cfg.ucb * math.sqrt(math.log(max(total, 2)) / n)
        out[domain] = max(cfg.min_weight, w * (lp + bonus))
    return out


MIXINGS: dict[str, Callable[..., dict[str, float]]] = {"fixed": fixed_mix, "learning_progress": learning_progress_mix}


# ------------------------------------------------------------------------------------ stages
def stage_index(batches: int, stages: Sequence[StageConfig]) -> int:
    """The stage in force once `batches` batches have been drawn (0 without stages)."""
    for i, stage in enumerate(stages):
        if stage.until_batch is None or batches < stage.until_batch:
            return i
    return max(0, len(stages) - 1)


def in_level(prior: float | None, stage: StageConfig) -> bool:
    """Whether a prompt's profiled pass rate lies in the stage's level (no prior: only an open level)."""
    if stage.min_prior is None and stage.max_prior is None:
        return True
    if prior is None:
        return False
    above = stage.min_prior is None or prior >= stage.min_prior
    return above and (stage.max_prior is None or prior <= stage.max_prior)
