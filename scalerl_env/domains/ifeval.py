"""The instruction-following domain (`if`): a prompt whose constraints a program can check (IFEval's
list: word counts, keywords, letter case, JSON output, ...), the third RLVR domain of Tülu 3.

The reference is the `answer` string: JSON naming the constraints and their arguments, in the RLVR
(`ground_truth` with `func_name`) or the IFEval (`instruction_id_list` + `kwargs`) form
(`scalerl.verifiers.ifeval.reference`); scored by `scalerl.verifiers.ifeval.verifier` (strict or
loose, all-must-pass or fraction: `verifier.if.*`). The prompt already states its constraints, so the
domain appends no instruction. Not trained by default: `scalerl train --domains math,code,if` adds it.
Hooks import their modules when called, so loading the registry stays cheap.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scalerl.env.contracts.domains import DomainSpec, GeneratorFamily, PromptDefaults, RowReference

if TYPE_CHECKING:
    from scalerl.env.sources.manifest import SourceManifest
    from scalerl.verifiers.ifeval.verifier import IfBatchVerifier
    from scalerl.verifiers.verifier_config import VerifierConfig


def verifier(config: VerifierConfig) -> IfBatchVerifier:
    from scalerl.verifiers.ifeval.verifier import IfBatchVerifier

    return IfBatchVerifier(config.if_, config.rewards)


def check_reference(reference: Any) -> None:
    """Raises ValueError naming what the verifier cannot read; the parsed form is not kept."""
    from scalerl.verifiers.ifeval.reference import parse_reference

    parse_reference(reference)


def claims_reference(reference: Any) -> bool:
    from scalerl.verifiers.ifeval.reference import claims

    return claims(reference)


def generator_families() -> Mapping[str, GeneratorFamily]:
    from scalerl.env.sources.generators.if_tasks import IF_FAMILIES

    return IF_FAMILIES


def row_reference(manifest: SourceManifest, row: dict[str, Any]) -> RowReference:
    """A public row's reference: the manifest's `answer` column (RLVR's `ground_truth`: a JSON string, a
    list holding one, or the object itself), else IFEval's `instruction_id_list` + `kwargs` columns; the
    manifest's `solution` column, when the row has it, is a gold response for `data check`."""
    from scalerl.env.sources.rows import RowFormatError
    from scalerl.verifiers.ifeval.reference import canonical

    value = row.get(manifest.answer) if manifest.answer else None
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        value = value[0]
    if value is None and row.get("instruction_id_list") is not None:
        value = {"instruction_id_list": row["instruction_id_list"], "kwargs": row.get("kwargs")}
    if value is None:
        raise RowFormatError(f"missing column {manifest.answer or 'instruction_id_list'!r}")
    reference = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    try:
        canonical(reference)  # refuses a reference the verifier could not score, naming the constraint
    except ValueError as exc:
        raise RowFormatError(f"column {manifest.answer or 'instruction_id_list'!r}: {exc}") from None
    solution = row.get(manifest.solution) if manifest.solution else None
    return RowReference(answer=reference, solution=solution if isinstance(solution, str) and solution else None)


SPEC = DomainSpec(
    name="if",
    reference="answer",
    description="a response checked against verifiable constraints (IFEval's list; strict or loose)",
    verifier=verifier,
    check_reference=check_reference,
    prompt=PromptDefaults(instruction="", marker=""),  # the prompt states its constraints itself
    generator_families=generator_families,
    row_reference=row_reference,
    verl_abilities=("ifeval", "instruction"),
    claims_reference=claims_reference,
    rank=2,
    trains_by_default=False,
)
