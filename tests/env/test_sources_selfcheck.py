"""Self-check on public data, end to end through the adapters: raw row → ProblemRecord → verify.

MATH-500 (datasets/reference/math500): every reference solution `correct` against its answer (500/500);
GSM8K test (1,319): every gold rationale `correct`; MBPP sanitized (PRIME's 399): every reference
program passes its asserts in the sandbox.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scalerl.env.contracts.records import Limits
from scalerl.env.sources.manifest import load_manifest
from scalerl.env.sources.prepare import check_records, prepare

from tests.support.reference import REFERENCE


def _selfcheck(source: str, path: Path, expected: int, limits: Limits | None = None):
    if not path.is_file():
        pytest.fail(f"reference data missing: {path}")
    result = prepare(load_manifest(source), files=[path])
    assert result.errors == [] and result.duplicates == 0
    assert len(result.records) == expected
    report = check_records(result.records, limits=limits)
    assert report.checked == expected
    assert report.failures == [], report.failures[:5]
    return result.records


def test_math500_reference_solutions_500_of_500():
    records = _selfcheck("math500", REFERENCE / "math500" / "test.jsonl", 500)
    assert all(r.metadata["solution"].count("boxed") >= 1 for r in records)


def test_gsm8k_gold_answers_all_correct():
    records = _selfcheck("gsm8k", REFERENCE / "gsm8k" / "test.jsonl", 1319)
    assert all("," not in r.answer for r in records)


def test_mbpp_reference_programs_399_of_399():
    # 10 s CPU per item as in tests/verifiers/test_code_mbpp.py: task 123's reference needs a few CPU seconds
    # on a loaded 2-core machine, more than the 2 s training default.
    _selfcheck("mbpp-sanitized", REFERENCE / "mbpp_sanitized_prime" / "new_mbpp.json", 399, Limits(time_s=10))
