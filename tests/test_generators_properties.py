"""Procedural generators: determinism, prefix stability, level-0 shape, registry (no verifier needed)."""

from __future__ import annotations

import re

import pytest

from scalerl_env.records import FunctionalTests, ProblemRecord, make_prompt_id
from scalerl_env.sources.generators import GENERATORS, families_at, generate

LEVELS = range(6)


@pytest.mark.parametrize("domain", ["math", "code"])
def test_same_seed_gives_identical_records(domain):
    first = generate(domain, seed=7, count=50, level=2)
    second = generate(domain, seed=7, count=50, level=2)
    assert [r.model_dump() for r in first] == [r.model_dump() for r in second]


@pytest.mark.parametrize("domain", ["math", "code"])
def test_shorter_count_is_a_prefix(domain):
    long = generate(domain, seed=3, count=40, level=1)
    short = generate(domain, seed=3, count=15, level=1)
    assert [r.model_dump() for r in short] == [r.model_dump() for r in long[:15]]


@pytest.mark.parametrize("domain", ["math", "code"])
def test_different_seeds_differ(domain):
    a = [r.prompt[0].content for r in generate(domain, seed=1, count=30, level=1)]
    b = [r.prompt[0].content for r in generate(domain, seed=2, count=30, level=1)]
    assert a != b


def test_records_carry_solution_task_and_level():
    for domain in ("math", "code"):
        for level in LEVELS:
            for record in generate(domain, seed=0, count=20, level=level):
                assert isinstance(record, ProblemRecord)
                assert record.domain == domain
                assert record.metadata["level"] == level
                assert record.metadata["task"] in GENERATORS
                assert GENERATORS[record.metadata["task"]].domain == domain
                assert GENERATORS[record.metadata["task"]].min_level <= level
                assert record.prompt_id == make_prompt_id(record.source, record.prompt[0].content)
                solution = record.metadata["solution"]
                if domain == "math":
                    assert solution == f"\\boxed{{{record.answer}}}"
                else:
                    assert solution.startswith("```python\n") and solution.endswith("\n```")


def test_level0_math_is_the_tiny_model_curriculum():
    pattern = re.compile(r"^(\d+)([+\-*])(\d+)=$")
    seen_ops = set()
    for record in generate("math", seed=11, count=2000, level=0):
        prompt = record.prompt[0].content
        match = pattern.match(prompt)
        assert match, prompt
        a, op, b = int(match.group(1)), match.group(2), int(match.group(3))
        seen_ops.add(op)
        bound = 9 if op == "*" else 19
        assert a <= bound and b <= bound, prompt
        assert int(record.answer) == {"+": a + b, "-": a - b, "*": a * b}[op]
        assert len(prompt) < 60
    assert seen_ops == {"+", "-", "*"}


def test_level0_code_is_a_linear_function_with_a_hidden_case():
    pattern = re.compile(r"^f\(1\)=(-?\d+) f\(2\)=(-?\d+) f\(3\)=(-?\d+) f\(x\)=$")
    for record in generate("code", seed=5, count=500, level=0):
        prompt = record.prompt[0].content
        assert len(prompt) < 60 and pattern.match(prompt), prompt
        tests = record.tests
        assert isinstance(tests, FunctionalTests) and tests.entry_point == "f"
        xs = [case.args[0] for case in tests.cases]
        assert xs[:3] == [1, 2, 3] and len(xs) == 4 and xs[3] not in (1, 2, 3)
        y1, y2, y3 = (int(v) for v in pattern.match(prompt).groups())
        slope = y2 - y1
        assert y3 - y2 == slope
        assert tests.cases[3].expected == y1 + slope * (xs[3] - 1)
        assert len(record.metadata["solution"]) < 60
        assert 1 <= slope <= 9 and -30 <= y1 - slope <= 30, prompt


def test_level0_code_space_is_large_enough_to_hold_out_hundreds():
    """Every (a, b) of the level-0 grid is a distinct prompt: 9 slopes × 61 intercepts = 549."""
    from scalerl_env.sources.generators.code_tasks import LEVEL0_INTERCEPTS, LEVEL0_SLOPES

    records = generate("code", seed=0, count=6000, level=0)
    prompts = {r.prompt[0].content for r in records}
    assert len({r.prompt_id for r in records}) == len(prompts) == len(LEVEL0_SLOPES) * len(LEVEL0_INTERCEPTS) == 549
    intercepts = {int(p.split()[0][5:]) - (int(p.split()[1][5:]) - int(p.split()[0][5:])) for p in prompts}
    assert intercepts == set(range(-30, 31))
    # the trainer's default draw (3000, deduplicated) reaches nearly all of them
    assert len({r.prompt_id for r in records[:3000]}) >= 530


def test_higher_levels_unlock_more_families():
    for domain in ("math", "code"):
        counts = [len(families_at(domain, level)) for level in LEVELS]
        assert counts == sorted(counts) and counts[-1] > counts[0]
    assert {f.name for f in families_at("math", 0)} == {"add", "sub", "mul"}
    assert {f.name for f in families_at("code", 0)} == {"linear_function"}


def test_every_family_is_reachable():
    drawn = {r.metadata["task"] for d in ("math", "code") for r in generate(d, seed=0, count=400, level=5)}
    assert drawn == set(GENERATORS)


def test_examples_identify_the_string_operation():
    """Two string operations never agree on all shown examples (else the prompt would be ambiguous)."""
    from scalerl_env.sources.generators.code_tasks import STRING_OPS

    for record in generate("code", seed=9, count=600, level=3):
        if record.metadata["task"] != "string_function":
            continue
        shown = [c for c in record.tests.cases if f'g({c.args[0]!r}'.replace("'", '"') in record.prompt[0].content]
        matching = [name for name, (_, fn) in STRING_OPS.items()
                    if all(fn(c.args[0]) == c.expected for c in shown)]
        assert len(matching) == 1, (record.prompt[0].content, matching)


@pytest.mark.parametrize("bad", [{"domain": "physics"}, {"count": -1}, {"level": -1}, {"seed": -2}])
def test_invalid_arguments_are_rejected(bad):
    args = {"domain": "math", "seed": 0, "count": 1, "level": 0} | bad
    with pytest.raises(ValueError):
        generate(args.pop("domain"), **args)
