"""The code domain: typed tests (stdio, functional, assert), run in the sandbox (`scalerl.verifiers.code.verifier`).
Hooks import their modules when called, so loading the registry imports no sandbox code."""

from __future__ import annotations

from typing import Any

from scalerl.env.contracts.domains import DomainSpec, PromptDefaults, deferred, section_verifier

_code_spec = deferred("scalerl.env.adapters:code_spec")


def _claims(reference: Any) -> bool:
    return _code_spec(reference) is not None


SPEC = DomainSpec(
    name="code",
    reference="tests",
    description="a Python program run against tests in the sandbox",
    verifier=section_verifier("scalerl.verifiers.code.verifier:CodeBatchVerifier", "code"),
    prompt=PromptDefaults(instruction="Answer with the complete code in a single ```python code block.",
                          marker="```python"),
    generator_families=deferred("scalerl.env.sources.generators.code_tasks:CODE_FAMILIES", call=False),
    row_reference=deferred("scalerl.env.sources.adapters:code_row_reference"),
    verl_abilities=("code", "coding"),
    claims_reference=_claims,
    rank=1,
)
