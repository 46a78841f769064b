"""The code domain: typed tests (stdio, functional, assert), run in the sandbox (`verifiers.code_batch`).
Hooks import their modules when called, so loading the registry imports no sandbox code."""

from __future__ import annotations

from typing import Any

from scalerl_env.contracts.domains import DomainSpec, PromptDefaults


def _verifier(config: Any):
    from verifiers.code_batch import CodeBatchVerifier

    return CodeBatchVerifier(config.code, config.rewards)


def _families():
    from scalerl_env.sources.generators.code_tasks import CODE_FAMILIES

    return CODE_FAMILIES


def _claims(reference: Any) -> bool:
    from scalerl_env.adapters import code_spec

    return code_spec(reference) is not None


def _row_reference(manifest, row, prompts):
    from scalerl_env.sources.adapters import code_row_reference

    return code_row_reference(manifest, row, prompts)


SPEC = DomainSpec(
    name="code",
    reference="tests",
    description="a Python program run against tests in the sandbox",
    verifier=_verifier,
    prompt=PromptDefaults(instruction="Answer with the complete code in a single ```python code block.",
                          marker="```python"),
    generator_families=_families,
    row_reference=_row_reference,
    verl_abilities=("code", "coding"),
    claims_reference=_claims,
    rank=1,
)
