"""The math domain: a reference answer string, scored by extraction, the exact fast path and sympy
(`scalerl.verifiers.math.verifier`). Hooks import their modules when called, so loading the registry stays cheap."""

from __future__ import annotations

from scalerl.env.contracts.domains import DomainSpec, PromptDefaults, deferred, section_verifier

SPEC = DomainSpec(
    name="math",
    reference="answer",
    description="a final answer checked against the reference (math-verify + sympy, exact fast path)",
    verifier=section_verifier("scalerl.verifiers.math.verifier:MathBatchVerifier", "math"),
    prompt=PromptDefaults(instruction="Please reason step by step, and put your final answer within \\boxed{}.",
                          marker="\\boxed"),
    generator_families=deferred("scalerl.env.sources.generators.math_tasks:MATH_FAMILIES", call=False),
    row_reference=deferred("scalerl.env.sources.adapters:math_row_reference"),
    verl_abilities=("math",),
    rank=0,
)
