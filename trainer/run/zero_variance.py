"""The zero-variance modes inside a training run (`curriculum.zero_variance.mode`: shrink | refill |
duplicate | keep) and the step's curriculum line.

The loop calls three phases from here (`scalerl.trainer.run.loop`): `refill_groups` (mode `refill` only:
take more scored groups until the step has `prompts_per_step` informative ones), `filter_zero_variance`
(which groups the step trains on under the mode) and `curriculum_metrics` (what was dropped, refilled,
duplicated, skipped, re-admitted and the effective batch, with `curriculum.stages` the current stage's
length budgets; one metrics.jsonl line per step). The decisions are `scalerl.curriculum.strategies`
functions; a group is informative when its rewards differ (`scalerl.curriculum.filters.has_variance`).

Guarantees
- With ScaleRL's defaults (mode shrink) the kept groups and their order are the informative groups in
  the order the step took them.
- Refill keeps the lag bound: it takes the oldest scored groups (`Runtime.take_extra_groups`) and credits
  the generator's admission with as many (`Runtime.credit_admission`), so the generator produces
  replacements (DAPO's extra generation cost), the in-flight count stays what the lag rule planned, and
  the pipeline never runs dry. Refill needs the in-process runtime (refused with Ray at setup).
Not guaranteed: that a refill round finds enough informative groups: after `max_refill_rounds`
rounds (or a take that waits past `refill_timeout_s`) the step trains on what it has.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scalerl.curriculum.filters import has_variance
from scalerl.curriculum.strategies import ZERO_VARIANCE_MODES
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.core.length_control import stage_length
from scalerl.trainer.rollout.messages import RolloutGroup

if TYPE_CHECKING:  # the run is built from setup, which imports the loop's phases, so only for types
    from scalerl.trainer.run.state import Run

log = logging.getLogger(__name__)


def refill_groups(run: Run, groups: list[RolloutGroup]) -> list[RolloutGroup]:
    """Mode `refill`: the groups taken beyond `groups` until `prompts_per_step` of all are informative
    (none in any other mode)."""
    cur = run.cfg.curriculum
    if cur.zero_variance.mode != "refill":
        return []
    target, extra = run.cfg.pipeline.prompts_per_step, []
    for _ in range(cur.zero_variance.max_refill_rounds):
        flags = [has_variance(g.rewards) for g in [*groups, *extra]]
        missing = ZERO_VARIANCE_MODES["refill"](flags, target, 0.0).want_more
        if missing == 0:
            break
        run.runtime.credit_admission(missing)  # the generator replaces what this round takes
        try:
            extra += run.runtime.take_extra_groups(missing, cur.zero_variance.refill_timeout_s)
        except TimeoutError:
            log.warning("refill: no %d more scored groups within %.0f s; training on what the step has",
                        missing, cur.zero_variance.refill_timeout_s)
            break
    return extra


def filter_zero_variance(run: Run, groups: list[RolloutGroup]) -> tuple[list[RolloutGroup], set[int]]:
    """The groups the step trains on under `curriculum.zero_variance.mode` (ScaleRL: drop the groups whose
    rewards are all equal, the batch shrinks) and the zero-variance group ids: the one zero-variance test
    of the step. Duplicates (mode duplicate) are copies with negative group ids, so each is its own group.
    No-positive resampling needs no phase here: the ledger retires prompts as the loop records them, and
    the sampler never draws a retired prompt again."""
    cur = run.cfg.curriculum
    flags = [has_variance(g.rewards) for g in groups]
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
