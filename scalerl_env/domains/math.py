"""The math domain: a reference answer string, scored by extraction, the exact fast path and sympy
(`verifiers.math_batch`). Hooks import their modules when called, so loading the registry stays cheap."""

from __future__ import annotations

from typing import Any

from scalerl_env.contracts.domains import DomainSpec, PromptDefaults


def _verifier(config: Any):
    from verifiers.math_batch import MathBatchVerifier

    return MathBatchVerifier(config.math, config.rewards)


def _families():
    from scalerl_env.sources.generators.math_tasks import MATH_FAMILIES

    return MATH_FAMILIES


def _row_reference(manifest, row, prompts):
    from scalerl_env.sources.adapters import math_row_reference

    return math_row_reference(manifest, row, prompts)


SPEC = DomainSpec(
    name="math",
    reference="answer",
    description="a final answer checked against the reference (math-verify + sympy, exact fast path)",
    verifier=_verifier,
    prompt=PromptDefaults(instruction="Please reason step by step, and put your final answer within \\boxed{}.",
                          marker="\\boxed"),
    generator_families=_families,
    row_reference=_row_reference,
    verl_abilities=("math",),
    rank=0,
)
