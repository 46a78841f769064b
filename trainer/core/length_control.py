"""Length control: ScaleRL's forced interruption, and DAPO's overlong penalty as the ablation.

`interrupt` (ScaleRL default): each request draws a thinking budget B uniformly from the integers
[think_budget_min_tokens, think_budget_max_tokens] (paper: [10k, 12k]). After B sampled tokens
without a stop, the engine appends the interruption phrase ("Okay, time is up. Let me stop thinking
and formulate a final answer now. </think>") — loss-masked, it was not sampled — and allows
`answer_budget_tokens` more (paper: 2k). A sample that still does not stop is truncated: its whole
loss mask becomes 0 (`mask_truncated`) and it is counted in the truncation rate, the health signal
(10–15 % means trouble).

`penalty` (DAPO soft overlong punishment), added to the reward of a completion of length L with
L_max = `max_response_tokens` (default: the engine's `max_new_tokens`, where sampling stops) and
L_cache = `penalty_buffer_tokens` (default L_max / 5, DAPO's 4,096 of 20,480):

    R_len(L) = 0                               if L ≤ L_max − L_cache
             = ((L_max − L_cache) − L) / L_cache  if L_max − L_cache < L ≤ L_max
             = −1                              if L > L_max
    then multiplied by `penalty_factor`.

The rollout worker adds it to each sample's reward as the group is scored (`RolloutGroup.rewards`),
so the zero-variance filter and the advantages see the shaped reward; the ledger records the
verifier's verdicts (pass rates and retirement stay about correctness). `penalty_applies_to`:
`all` (DAPO) or `correct` (only samples scored correct are penalized, so a long wrong answer is not
ranked below a short wrong one).

Curriculum stages (`curriculum.stages`) may set their own budgets: `stage_length` resolves the
settings of a request started in a stage (the stage's value where set, the run's elsewhere), and the
penalty's L_max follows the `max_new_tokens` the sample was generated under (its request's).

Departure: in `penalty` mode truncated samples are still loss-masked when `mask_truncated` is true
(the default for both modes); set it false for DAPO's setting where they train with R_len = −1.
Non-guarantee: the engine enforces the plan; this module only plans and accounts.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from scalerl.curriculum.strategy_config import StageConfig
from scalerl.trainer.core.recipe_config import LengthConfig
from scalerl.trainer.engines.base import GeneratedSample, InterruptionPlan

STAGE_LENGTH_FIELDS = ("think_budget_min_tokens", "think_budget_max_tokens", "answer_budget_tokens")
"""The `length.*` budgets a curriculum stage may override (`max_new_tokens` overrides `engine.*`)."""


def stage_length(length: LengthConfig, max_new_tokens: int, stage: StageConfig | None) -> tuple[LengthConfig, int]:
    """The length settings and sampling budget of a request started in `stage`: the stage's budgets where
    it sets them, the run's (`length`, `max_new_tokens`) elsewhere. No stage, or a stage without budgets:
    the run's own objects, unchanged. Not validated here (`TrainConfig` checks every stage)."""
    if stage is None:
        return length, max_new_tokens
    update = {f: getattr(stage, f) for f in STAGE_LENGTH_FIELDS if getattr(stage, f) is not None}
    return (length.model_copy(update=update) if update else length), stage.max_new_tokens or max_new_tokens


def output_budget(length: LengthConfig, max_new_tokens: int, phrase_tokens: int) -> int:
    """Most output tokens a sample can have under these settings (`GenerationRequest.output_budget` of
    its request): thinking budget + interruption phrase + answer budget, or `max_new_tokens`."""
    if length.mode == "interrupt":
        return length.think_budget_max_tokens + phrase_tokens + length.answer_budget_tokens
    return max_new_tokens


def _uniform_int(rng: Any, low: int, high: int) -> int:
    """An integer uniform in [low, high] from a `random.Random`, a numpy Generator or a torch Generator."""
    if hasattr(rng, "integers"):  # numpy.random.Generator: high is exclusive
        return int(rng.integers(low, high + 1))
    if isinstance(rng, random.Random):
        return rng.randint(low, high)
    import torch

    if isinstance(rng, torch.Generator):
        return int(torch.randint(low, high + 1, (1,), generator=rng))
    raise TypeError(
        f"rng must be random.Random, numpy Generator or torch.Generator, got {type(rng).__name__}"
    )


def plan_interruption(cfg: LengthConfig, rng: Any, *, phrase_token_ids: Sequence[int]) -> InterruptionPlan | None:
    """The interruption plan of one request (the phrase tokenized by the caller's tokenizer), or None
    when `cfg.mode` is not `interrupt`."""
    if cfg.mode != "interrupt":
        return None
    ids = list(phrase_token_ids)
    if not ids:
        raise ValueError("interrupt mode needs the interruption phrase's token ids (empty phrase)")
    budget = _uniform_int(rng, cfg.think_budget_min_tokens, cfg.think_budget_max_tokens)
    return InterruptionPlan(
        think_budget_tokens=budget, phrase_token_ids=ids, answer_budget_tokens=cfg.answer_budget_tokens
    )


def length_penalty(num_tokens: int, cfg: LengthConfig, max_new_tokens: int) -> float:
    """DAPO's soft overlong penalty for a completion of `num_tokens` (≤ 0); 0 unless mode is `penalty`.
    L_max and L_cache come from `cfg.penalty_budget(max_new_tokens)` (the engine's sampling budget)."""
    if cfg.mode != "penalty":
        return 0.0
    l_max, l_cache = cfg.penalty_budget(max_new_tokens)
    soft_start = l_max - l_cache
    if num_tokens <= soft_start:
        return 0.0
    if num_tokens <= l_max:
        return cfg.penalty_factor * (soft_start - num_tokens) / l_cache
    return -cfg.penalty_factor


def length_penalties(samples: Sequence[GeneratedSample], correct: Sequence[bool], cfg: LengthConfig,
                     max_new_tokens: int) -> list[float]:
    """The penalty added to each sample's reward (all zeros outside `penalty` mode); with
    `penalty_applies_to = correct` only samples scored correct are penalized."""
    return [length_penalty(len(s.token_ids), cfg, max_new_tokens)
            if cfg.penalty_applies_to == "all" or ok else 0.0 for s, ok in zip(samples, correct)]


def training_loss_mask(sample: GeneratedSample, cfg: LengthConfig) -> list[int]:
    """The loss mask to train with: the engine's mask (0 on the injected phrase), all 0 if truncated."""
    if sample.truncated and cfg.mask_truncated:
        return [0] * len(sample.token_ids)
    return list(sample.loss_mask)


def length_metrics(samples: Sequence[GeneratedSample]) -> dict[str, float]:
    """`length/truncation_rate` (the health signal), `length/interrupted_rate`, mean/max completion tokens."""
    n = len(samples)
    if n == 0:
        return {"length/samples": 0.0}
    lengths = [len(s.token_ids) for s in samples]
    return {
        "length/samples": float(n),
        "length/truncation_rate": sum(s.truncated for s in samples) / n,
        "length/interrupted_rate": sum(s.interrupted for s in samples) / n,
        "length/mean_tokens": sum(lengths) / n,
        "length/max_tokens": float(max(lengths)),
    }
