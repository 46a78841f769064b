"""Verifier settings: one pydantic model, the one source of truth for every verifier default."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from scalerl_env.records import RewardTable, Strict


class MathConfig(Strict):
    workers: int = Field(default=2, ge=1, le=64, description="persistent math-verify worker processes")
    timeout_s: float = Field(default=5.0, gt=0, description="hard per-item deadline; the worker is killed past it")
    max_completion_chars: int = Field(default=1_000_000, ge=1, description="longer completions are cut from the front")
    max_answer_chars: int = Field(default=1000, ge=1, description="extracted answers longer than this are unparsable")
    soft_timeout_fraction: float | None = Field(
        default=0.8, gt=0, le=1, description="the worker's own timer fires at this fraction of timeout_s "
        "(answers `timeout` without a kill when the work is interruptible); null = hard deadline only"
    )
    worker_memory_mb: int = Field(default=2048, ge=0, description="address-space limit per worker; 0 = none")
    fast_path: bool = Field(default=True, description="decide plain numbers exactly before sympy")
    dedupe: bool = Field(default=True, description="score identical (answer, extracted) pairs once per batch")
    guard_false_positives: bool = Field(
        default=True, description="reject math-verify 'equal' on float-free numbers whose values differ"
    )
    float_rounding: int = Field(default=6, ge=0, le=30, description="math-verify: decimals compared for floats")
    numeric_precision: int = Field(default=15, ge=1, le=100, description="math-verify: evalf digits")
    strict: bool = Field(default=True, description="math-verify: variable names matter")
    allow_set_relation_comp: bool = Field(default=False, description="math-verify: compare sets with relations")


class CodeConfig(Strict):
    sandbox: Literal["strict", "standard", "minimal"] = Field(
        default="strict", description="minimum isolation level; refuse to run below it"
    )
    slots: int = Field(default=2, ge=1, le=64, description="concurrent sandboxed executions")
    stop_at_first_failure: bool = True
    max_output_bytes: int = Field(default=1 << 20, ge=1024)


class VerifierConfig(Strict):
    math: MathConfig = Field(default_factory=MathConfig)
    code: CodeConfig = Field(default_factory=CodeConfig)
    rewards: RewardTable = Field(default_factory=RewardTable)
