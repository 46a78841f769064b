"""The instruction-following domain (`if`): a prompt whose constraints a program can check (IFEval's
list: word counts, keywords, letter case, JSON output, ...), the third RLVR domain of Tülu 3.

The reference is the `answer` string: JSON naming the constraints and their arguments, in the RLVR
(`ground_truth` with `func_name`) or the IFEval (`instruction_id_list` + `kwargs`) form
(`scalerl.verifiers.ifeval.reference`); scored by `scalerl.verifiers.ifeval.verifier` (strict or loose,
all-must-pass or fraction:
`verifier.if.*`). The prompt already states its constraints, so the domain appends no instruction.
Not trained by default: `scalerl train --domains math,code,if` adds it. Hooks import their modules when
called, so loading the registry stays cheap.
"""

from __future__ import annotations

import json
from typing import Any

from scalerl.env.contracts.domains import DomainSpec, PromptDefaults, RowReference, deferred, section_verifier

_parse_reference = deferred("scalerl.verifiers.ifeval.reference:parse_reference")


def _check(reference: Any) -> None:
    _parse_reference(reference)  # raises ValueError naming what it cannot read; the parsed form is not kept


def row_reference(manifest: Any, row: dict[str, Any], prompts: Any) -> RowReference:
    """A public row's reference: the manifest's `answer` column (RLVR's `ground_truth`: a JSON string, a
    list holding one, or the object itself), else IFEval's `instruction_id_list` + `kwargs` columns; the
    manifest's `solution` column, when the row has it, is a gold response for `data check`."""
    from scalerl.env.sources.adapters import AdapterError
    from scalerl.verifiers.ifeval.reference import canonical

    value = row.get(manifest.answer) if manifest.answer else None
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        value = value[0]
    if value is None and row.get("instruction_id_list") is not None:
        value = {"instruction_id_list": row["instruction_id_list"], "kwargs": row.get("kwargs")}
    if value is None:
        raise AdapterError(f"missing column {manifest.answer or 'instruction_id_list'!r}")
    reference = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    try:
        canonical(reference)  # refuses a reference the verifier could not score, naming the constraint
    except ValueError as exc:
        raise AdapterError(f"column {manifest.answer or 'instruction_id_list'!r}: {exc}") from None
    solution = row.get(manifest.solution) if manifest.solution else None
    return RowReference(answer=reference, solution=solution if isinstance(solution, str) and solution else None)


SPEC = DomainSpec(
    name="if",
    reference="answer",
    description="a response checked against verifiable constraints (IFEval's list; strict or loose)",
    verifier=section_verifier("scalerl.verifiers.ifeval.verifier:IfBatchVerifier", "if"),
    verifier_config=deferred("scalerl.verifiers.ifeval.verifier:IfConfig", call=False),
    check_reference=_check,
    prompt=PromptDefaults(instruction="", marker=""),  # the prompt states its constraints itself
    generator_families=deferred("scalerl.env.sources.generators.if_tasks:IF_FAMILIES", call=False),
    row_reference=row_reference,
    verl_abilities=("ifeval", "instruction"),
    claims_reference=deferred("scalerl.verifiers.ifeval.reference:claims"),
    rank=2,
    trains_by_default=False,
)
