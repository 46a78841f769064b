"""Length control: ScaleRL's forced interruption, and DAPO's overlong penalty as the ablation.

`interrupt` (ScaleRL default): each request draws a thinking budget B uniformly from the integers
[think_budget_min_tokens, think_budget_max_tokens] (paper: [10k, 12k]). After B sampled tokens
without a stop, the engine appends the interruption phrase ("Okay, time is up. Let me stop thinking
and formulate a final answer now. </think>") — loss-masked, it was not sampled — and allows
`answer_budget_tokens` more (paper: 2k). A sample that still does not stop is truncated: its whole
loss mask becomes 0 (`mask_truncated`) and it is counted in the truncation rate, the health signal
(10–15 % means trouble).

`penalty` (DAPO soft overlong punishment), added to the reward of a completion of length L with
L_max = `max_response_tokens` and L_cache = `penalty_buffer_tokens`:

    R_len(L) = 0                               if L ≤ L_max − L_cache
             = ((L_max − L_cache) − L) / L_cache  if L_max − L_cache < L ≤ L_max
             = −1                              if L > L_max
    then multiplied by `penalty_factor`.

Departure: in `penalty` mode truncated samples are still loss-masked when `mask_truncated` is true
(the default for both modes); set it false for DAPO's setting where they train with R_len = −1.
Non-guarantee: the engine enforces the plan; this module only plans and accounts.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, model_validator

from scalerl_env.records import Strict
from trainer.engines.base import GeneratedSample, InterruptionPlan

DEFAULT_PHRASE = "Okay, time is up. Let me stop thinking and formulate a final answer now. </think>"


class LengthConfig(Strict):
    mode: Literal["interrupt", "penalty", "none"] = Field(
        default="interrupt", description="interrupt (ScaleRL), penalty (DAPO) or none"
    )
    think_budget_min_tokens: int = Field(default=10_000, ge=1)
    think_budget_max_tokens: int = Field(default=12_000, ge=1)
    answer_budget_tokens: int = Field(default=2_000, ge=1, description="tokens allowed after the phrase")
    interruption_phrase: str = DEFAULT_PHRASE
    phrase_token_ids: list[int] | None = Field(
        default=None,
        description="the phrase already tokenized; else pass phrase_token_ids to plan_interruption",
    )
    mask_truncated: bool = Field(default=True, description="drop truncated samples from the loss")
    max_response_tokens: int = Field(default=14_000, ge=1, description="DAPO L_max")
    penalty_buffer_tokens: int = Field(default=4_000, ge=1, description="DAPO L_cache")
    penalty_factor: float = Field(default=1.0, ge=0)

    @model_validator(mode="after")
    def _ranges(self) -> LengthConfig:
        if self.think_budget_min_tokens > self.think_budget_max_tokens:
            raise ValueError("think_budget_min_tokens must be <= think_budget_max_tokens")
        if self.penalty_buffer_tokens > self.max_response_tokens:
            raise ValueError("penalty_buffer_tokens must be <= max_response_tokens")
        return self


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


def plan_interruption(
    cfg: LengthConfig, rng: Any, *, phrase_token_ids: Sequence[int] | None = None
) -> InterruptionPlan | None:
    """The interruption plan of one request, or None when `cfg.mode` is not `interrupt`."""
    if cfg.mode != "interrupt":
        return None
    ids = list(phrase_token_ids) if phrase_token_ids is not None else cfg.phrase_token_ids
    if not ids:
        raise ValueError(
            "interrupt mode needs the phrase token ids: set length.phrase_token_ids or pass them"
        )
    budget = _uniform_int(rng, cfg.think_budget_min_tokens, cfg.think_budget_max_tokens)
    return InterruptionPlan(
        think_budget_tokens=budget, phrase_token_ids=ids, answer_budget_tokens=cfg.answer_budget_tokens
    )


def encode_phrase(cfg: LengthConfig, tokenizer: Any) -> list[int]:
    """Token ids of the interruption phrase with `tokenizer` (no special tokens added)."""
    return list(tokenizer.encode(cfg.interruption_phrase, add_special_tokens=False))


def length_penalty(num_tokens: int, cfg: LengthConfig) -> float:
    """DAPO's soft overlong penalty for a completion of `num_tokens` (≤ 0); 0 unless mode is `penalty`."""
    if cfg.mode != "penalty":
        return 0.0
    soft_start = cfg.max_response_tokens - cfg.penalty_buffer_tokens
    if num_tokens <= soft_start:
        return 0.0
    if num_tokens <= cfg.max_response_tokens:
        return cfg.penalty_factor * (soft_start - num_tokens) / cfg.penalty_buffer_tokens
    return -cfg.penalty_factor


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
