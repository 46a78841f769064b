"""The math domain: a reference answer string, scored by extraction, the exact fast path and sympy
(`scalerl.verifiers.math`). Its spec, and the hooks that read a public dataset's row.

A row's answer is read as the manifest says: the column as it is, the text after GSM8K's `####`
(thousands separators dropped from a plain number), or the last `\\boxed{}` of a worked solution (with
the verifier's own extractor, so the answer is what the verifier would read). The gold completion is
the worked solution when it holds a box, GSM8K's rationale with its `####` line turned into
`\\boxed{}`, `\\boxed{answer}` otherwise. Hooks import their modules when called, so loading the
registry stays cheap.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scalerl.env.contracts.domains import DomainSpec, GeneratorFamily, PromptDefaults, RowReference

if TYPE_CHECKING:
    from scalerl.env.sources.manifest import SourceManifest
    from scalerl.verifiers.math.verifier import MathBatchVerifier
    from scalerl.verifiers.verifier_config import VerifierConfig

_NUMBER_WITH_COMMAS = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")


def verifier(config: VerifierConfig) -> MathBatchVerifier:
    from scalerl.verifiers.math.verifier import MathBatchVerifier

    return MathBatchVerifier(config.math, config.rewards)


def generator_families() -> Mapping[str, GeneratorFamily]:
    from scalerl.env.sources.generators.math_tasks import MATH_FAMILIES

    return MATH_FAMILIES


def row_reference(manifest: SourceManifest, row: dict[str, Any]) -> RowReference:
    """A public row's answer and gold completion (rules in the module docstring)."""
    from scalerl.env.sources.rows import RowFormatError, column_text

    name = manifest.answer or manifest.problem
    text = column_text(row, name)
    if manifest.answer_from == "gsm8k":
        rationale, sep, raw = text.rpartition("####")
        if not sep or not raw.strip():
            raise RowFormatError(f"column {name!r} has no '#### answer' line")
        raw = raw.strip()
        answer = raw.replace(",", "") if _NUMBER_WITH_COMMAS.match(raw) else raw
        return RowReference(answer=answer, solution=f"{rationale.rstrip()}\nThe final answer is $\\boxed{{{raw}}}$.")
    if manifest.answer_from == "boxed":
        answer = _boxed(text)
        if answer is None:
            raise RowFormatError(f"column {name!r} has no \\boxed{{}} answer")
        return RowReference(answer=answer, solution=text)
    answer = text.strip()
    if answer.lower() in {a.lower() for a in manifest.skip_answers}:
        raise RowFormatError(f"answer {answer!r} is not verifiable (skip_answers)")
    solution = row.get(manifest.solution) if manifest.solution else None
    if isinstance(solution, str) and _boxed(solution) is not None:
        return RowReference(answer=answer, solution=solution)
    return RowReference(answer=answer, solution=f"\\boxed{{{answer}}}")


def _boxed(text: str) -> str | None:
    from scalerl.verifiers.math.extract import extract_answer

    found = extract_answer(text)
    return found.answer if found.kind == "answer" and found.method == "boxed" else None


SPEC = DomainSpec(
    name="math",
    reference="answer",
    description="a final answer checked against the reference (math-verify + sympy, exact fast path)",
    verifier=verifier,
    prompt=PromptDefaults(instruction="Please reason step by step, and put your final answer within \\boxed{}.",
                          marker="\\boxed"),
    generator_families=generator_families,
    row_reference=row_reference,
    verl_abilities=("math",),
    rank=0,
)
