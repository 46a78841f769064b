"""The settings of the trainer core: loss, advantages, optimizer/update step, length control.

Config only (pydantic, no torch), so `scalerl.trainer.config.train` can compose them without importing tensor code.
Defaults are the paper's, except the step size and the length budgets: those are the built-in CPU
default's (AdamW lr 1e-4 with 20 warm-up steps, 40-48 + 16 tokens after a short phrase; the paper's
5e-7 / 100 and 10k-12k + 2k are `--preset paper`, `scalerl.trainer.config.presets`). The formulas each
setting selects are documented in the module that uses it (`scalerl.trainer.core.losses`, `.advantages`,
`.update`, `.length_control`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator
from scalerl.env.contracts.records import Strict

Aggregation = Literal["prompt", "sample", "token"]
DEFAULT_PHRASE = "Okay, time is up. Let me stop thinking and formulate a final answer now. </think>"


class LossConfig(Strict):
    """The ablation switches of the loss; defaults are the paper's.

    Clip ranges of the alternatives are the values the ScaleRL paper (arXiv 2510.13786) ran them with,
    which is what `scalerl ablate`'s `loo-dapo` and a `loss.name=gspo` run use:
    - DAPO ε_low 0.2 / ε_high 0.26: its DAPO recipe (Appendix A.17, tuned in A.18.1 / Fig. 19a, where
      ε_high moves the asymptote A itself; DAPO's own paper, arXiv 2503.14476, uses 0.28).
    - GSPO 3e-3 / 5e-3 on the length-normalized sequence ratio: Appendix A.18.3 / Fig. 20, where the
      GSPO paper's 1e-4 scale (3e-4 / 4e-4, arXiv 2507.18071) did not work as well and 5e-3 upper
      was slightly better than 4e-3.
    - CISPO ε_max 5: A.18.2 / Fig. 19b found {4, 5, 8} indistinguishable, lower clip 0 (none here)."""

    name: Literal["cispo", "dapo", "gspo", "grpo"] = Field(
        default="cispo", description="policy loss (ScaleRL uses CISPO)"
    )
    aggregation: Aggregation = Field(
        default="prompt", description="prompt (ScaleRL), sample (GRPO) or token (DAPO) averaging"
    )
    eps_max: float = Field(default=5.0, gt=0, description="CISPO cap on the stop-gradient ratio")
    eps_low: float = Field(default=0.2, ge=0, lt=1, description="PPO-style lower clip (dapo, grpo)")
    eps_high: float = Field(default=0.26, ge=0, description="DAPO clip-higher upper clip")
    gspo_eps_low: float = Field(default=3e-3, ge=0, lt=1, description="GSPO lower clip (sequence ratio)")
    gspo_eps_high: float = Field(default=5e-3, ge=0, description="GSPO upper clip (sequence ratio)")


class AdvantageConfig(Strict):
    normalization: Literal["batch", "prompt", "none"] = Field(
        default="batch", description="batch (ScaleRL), prompt (GRPO) or none (Dr. GRPO)"
    )
    eps: float = Field(default=1e-6, ge=0, description="added to the std before dividing")
    std_includes_zero_variance: bool = Field(
        default=False, description="batch std over all samples instead of the effective batch"
    )


class OptimConfig(Strict):
    """Optimizer and update-step settings (defaults: see the module docstring). The logprobs are taken at
    the engine's sampling temperature (`engine.temperature`), the one setting of it."""

    GONE = {"temperature": "the trainer scores at engine.temperature (set that)"}

    lr: float = Field(default=1e-4, gt=0, description="the CPU default's (the tiny model needs a large step); "
                      "paper 5e-7")
    warmup_steps: int = Field(default=20, ge=0, description="linear warm-up, then constant lr (paper 100)")
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = Field(default=1e-15, gt=0)
    weight_decay: float = Field(default=0.01, ge=0)
    max_grad_norm: float | None = Field(default=1.0, gt=0, description="None disables clipping")
    micro_batch_tokens: int = Field(
        default=4_096, ge=1, description="token budget of one micro-batch (packed attention mask is T×T)"
    )
    precision: Literal["auto", "bf16", "fp32"] = "auto"
    fp32_head: bool = Field(
        default=True, description="LM head + log-softmax in fp32 (ScaleRL); off = ablation"
    )
    attention_layout: Literal["auto", "packed", "padded"] = Field(
        default="auto", description="how the decoder sees packed sequences (scalerl.trainer.core.fp32_head); "
        "same result"
    )
    activation_checkpointing: bool = Field(
        default=False, description="recompute each decoder layer in backward (keeps only layer inputs; "
        "scalerl.trainer.memory.plan counts both)"
    )


class LengthConfig(Strict):
    mode: Literal["interrupt", "penalty", "none"] = Field(
        default="interrupt", description="interrupt (ScaleRL), penalty (DAPO) or none"
    )
    think_budget_min_tokens: int = Field(default=40, ge=1, description="the CPU default's; paper 10,000")
    think_budget_max_tokens: int = Field(default=48, ge=1, description="the CPU default's; paper 12,000")
    answer_budget_tokens: int = Field(
        default=16, ge=1, description="tokens allowed after the phrase (the CPU default's; paper 2,000)")
    interruption_phrase: str = Field(
        default="\nTime is up. ", description="the CPU default's short phrase; the paper's is DEFAULT_PHRASE")
    mask_truncated: bool = Field(default=True, description="drop truncated samples from the loss")
    max_response_tokens: int | None = Field(
        default=None, ge=1, description="penalty mode: DAPO L_max; None = the engine's max_new_tokens")
    penalty_buffer_tokens: int | None = Field(
        default=None, ge=1, description="penalty mode: DAPO L_cache; None = L_max / 5 (DAPO: 4,096 of 20,480)")
    penalty_factor: float = Field(default=1.0, ge=0)
    penalty_applies_to: Literal["all", "correct"] = Field(
        default="all", description="all (DAPO: every sample's reward) or correct (only samples scored correct)")

    @model_validator(mode="after")
    def _ranges(self) -> LengthConfig:
        if self.think_budget_min_tokens > self.think_budget_max_tokens:
            raise ValueError("think_budget_min_tokens must be <= think_budget_max_tokens")
        if (self.penalty_buffer_tokens is not None and self.max_response_tokens is not None
                and self.penalty_buffer_tokens > self.max_response_tokens):
            raise ValueError("penalty_buffer_tokens must be <= max_response_tokens")
        return self

    def penalty_budget(self, max_new_tokens: int) -> tuple[int, int]:
        """(L_max, L_cache) of the overlong penalty for an engine that samples at most `max_new_tokens`."""
        l_max = self.max_response_tokens or max_new_tokens
        return l_max, min(l_max, self.penalty_buffer_tokens or max(1, l_max // 5))
