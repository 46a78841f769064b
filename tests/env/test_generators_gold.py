"""Generated problems' own gold completions score `correct` with the real verifiers (math-verify, sandbox).

Default run: thousands of math problems and hundreds of code problems over many seeds and all levels
0-5; the slow run goes ten times further.
"""

from __future__ import annotations

import pytest
from scalerl.env.sources.generators import generate
from scalerl.env.sources.prepare import check_records


def _records(domain: str, seeds: range, per_seed: int, levels=range(6)):
    return [r for seed in seeds for level in levels
            for r in generate(domain, seed=seed, count=per_seed, level=level)]


def _assert_all_correct(records):
    report = check_records(records)
    assert report.checked == len(records)
    assert report.failures == [], report.failures[:5]


def test_math_gold_answers_are_correct_over_thousands_of_seeds():
    _assert_all_correct(_records("math", range(500), 1) + _records("math", range(1000, 1010), 150))


def test_code_gold_programs_pass_their_tests():
    _assert_all_correct(_records("code", range(40), 1) + _records("code", range(100, 102), 20))


def test_code_level0_gold_passes_for_every_operation():
    """Level-0 one-line solutions (no fence) pass their shown and hidden cases, every operation."""
    records = generate("code", seed=0, count=300, level=0)
    assert len({r.metadata["solution"] for r in records}) == 9
    _assert_all_correct(records)


@pytest.mark.slow
def test_code_level0_gold_over_thousands_of_seeds_slow():
    _assert_all_correct(_records("code", range(3000), 1, levels=[0]))


@pytest.mark.slow
def test_math_gold_answers_are_correct_slow():
    _assert_all_correct(_records("math", range(5000), 2))


@pytest.mark.slow
def test_code_gold_programs_pass_their_tests_slow():
    _assert_all_correct(_records("code", range(500), 2))
