"""The curriculum strategies inside a training run: the sampler's policy and the zero-variance modes.

The loop calls three phases from here (`scalerl.trainer.run.loop`): `refill_groups` (mode `refill` only: take
more scored groups until the step has `prompts_per_step` informative ones), `plan_zero_variance`
(which groups the step trains on under the mode: shrink | refill | duplicate | keep) and
`curriculum_metrics` (what was dropped, refilled, duplicated, skipped, re-admitted and the effective
batch, with `curriculum.stages` the current stage's length budgets; one metrics.jsonl line per step).
The decisions are `scalerl.curriculum.strategies` functions.

Guarantees
- With ScaleRL's defaults (mode shrink, no sampler strategy) the kept groups, their order and the
  sampler's draws are exactly what the loop trained on before these phases existed: `build_policy`
  returns None and `plan_zero_variance` keeps the informative groups in order.
- Refill keeps the lag bound: it takes the oldest scored groups (`take_extra`) and credits the
  generator's admission with as many, so the generator produces replacements (DAPO's extra generation
  cost), the in-flight count stays what the lag rule planned, and the pipeline never runs dry.
  `take_extra` and `credit_admission` call the in-process runtime's `take_extra_groups` /
  `credit_admission` (refill is refused with Ray).
Not guaranteed: that a refill round finds enough informative groups: after `max_refill_rounds`
rounds (or a take that waits past `refill_timeout_s`) the step trains on what it has.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from scalerl.curriculum.filters import zero_variance_filter
from scalerl.curriculum.policy import CurriculumPolicy, policy_for
from scalerl.curriculum.strategies import ZERO_VARIANCE_MODES
from scalerl.env.contracts.config import ConfigError
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.core.length_control import stage_length
from scalerl.trainer.rollout.messages import RolloutGroup
from scalerl.trainer.rollout.runtime import Runtime

if TYPE_CHECKING:  # the run is built from this module's policy (scalerl.trainer.run.setup), so only for types
    from scalerl.trainer.run.state import Run

log = logging.getLogger(__name__)


def build_policy(cfg: TrainConfig) -> CurriculumPolicy | None:
    """The sampler's strategy hook, or None under ScaleRL's defaults (the sampler's plain walk)."""
    cur = cfg.curriculum
    if cur.zero_variance.mode == "refill" and cfg.ray.enabled:
        raise ConfigError("curriculum.zero_variance.mode=refill needs the in-process runtime (ray.enabled=false)")
    return policy_for(cur, cfg.pipeline.seed)


def informative(groups: list[RolloutGroup]) -> list[bool]:
    """One flag per group: its rewards are not all equal (the filter of the ScaleRL recipe)."""
    kept = {g.group_id for g in zero_variance_filter(groups)[0]}
    return [g.group_id in kept for g in groups]


def credit_admission(runtime: Runtime, n: int) -> None:
    """Let the generator submit `n` more groups than the admission rule's count (they replace groups a
    refill took beyond the step's share; the outstanding count, hence the lag bound, is unchanged)."""
    runtime.credit_admission(n)


def take_extra(runtime: Runtime, n: int, timeout_s: float) -> list[RolloutGroup]:
    """The `n` oldest scored groups, beyond the step's share. `take_groups(n)` would judge the lag rule as
    if every step took only `n` groups (and wait in vain); taking the oldest scored groups early only
    moves their deadlines' work forward, so no group left behind can miss its deadline."""
    return runtime.take_extra_groups(n, timeout_s)


def refill_groups(run: Run, groups: list[RolloutGroup],
                  record: Callable[[Run, list[RolloutGroup]], None]) -> list[RolloutGroup]:
    """Mode `refill`: take (and record) more groups until `prompts_per_step` of them are informative."""
    cur = run.cfg.curriculum
    if cur.zero_variance.mode != "refill":
        return groups
    target, out = run.cfg.pipeline.prompts_per_step, list(groups)
    for _ in range(cur.zero_variance.max_refill_rounds):
        missing = ZERO_VARIANCE_MODES["refill"](informative(out), target, 0.0).want_more
        if missing == 0:
            break
        credit_admission(run.runtime, missing)
        try:
            more = take_extra(run.runtime, missing, cur.zero_variance.refill_timeout_s)
        except TimeoutError:
            log.warning("refill: no %d more scored groups within %.0f s; training on what the step has",
                        missing, cur.zero_variance.refill_timeout_s)
            break
        record(run, more)
        out += more
    return out


def plan_zero_variance(run: Run, groups: list[RolloutGroup]) -> tuple[list[RolloutGroup], set[int]]:
    """The groups the step trains on under the zero-variance mode, and the zero-variance group ids.
    Duplicates (mode duplicate) are copies with negative group ids, so each is its own group."""
    cur = run.cfg.curriculum
    flags = informative(groups)
    zero_var_ids = {g.group_id for g, ok in zip(groups, flags) if not ok}
    plan = ZERO_VARIANCE_MODES[cur.zero_variance.mode](
        flags, run.cfg.pipeline.prompts_per_step, cur.zero_variance.duplicate_min_fraction)
    kept = [groups[i] for i in plan.keep]
    kept += [groups[i].model_copy(update={"group_id": -(j + 1)}) for j, i in enumerate(plan.duplicate)]
    return kept, zero_var_ids


def curriculum_metrics(run: Run, groups: list[RolloutGroup], kept: list[RolloutGroup]) -> dict[str, float]:
    """The step's curriculum line: groups dropped, refilled and duplicated, whether the step was skipped,
    the trained groups, plus the sampler policy's events (skipped, benched, re-admitted, ...) and gauges."""
    trained = {g.group_id for g in kept if g.group_id >= 0}
    out = {
        "curriculum/dropped": float(sum(g.group_id not in trained for g in groups)),
        "curriculum/refilled": float(max(0, len(groups) - run.cfg.pipeline.prompts_per_step)),
        "curriculum/duplicated": float(sum(g.group_id < 0 for g in kept)),
        "curriculum/skipped_step": float(bool(groups) and not kept),
        "curriculum/trained_groups": float(len(kept)),
    }
    policy = getattr(run.sampler, "policy", None)
    if policy is not None:
        out.update(policy.take_metrics())
    if run.cfg.curriculum.stages and "curriculum/stage" in out:
        out.update(stage_budget_metrics(run.cfg, int(out["curriculum/stage"])))
    return out


def stage_budget_metrics(cfg: TrainConfig, stage: int) -> dict[str, float]:
    """The length budgets of requests started in `stage` (logged for the sampler's current stage, next to
    `curriculum/stage`): the thinking and answer budgets in interrupt mode, else the sampling budget (and
    the penalty's L_max in penalty mode)."""
    length, max_new = stage_length(cfg.length, cfg.engine.max_new_tokens, cfg.curriculum.stages[stage])
    if length.mode == "interrupt":
        return {"curriculum/budget/think_min": float(length.think_budget_min_tokens),
                "curriculum/budget/think_max": float(length.think_budget_max_tokens),
                "curriculum/budget/answer": float(length.answer_budget_tokens)}
    out = {"curriculum/budget/max_new_tokens": float(max_new)}
    if length.mode == "penalty":
        out["curriculum/budget/penalty_l_max"] = float(length.penalty_budget(max_new)[0])
    return out
