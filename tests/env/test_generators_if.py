"""The instruction-following generator: deterministic, short at level 0, every family reachable, and every
gold response `correct` with the real verifier (strict mode) over many seeds and levels 0-3."""

from __future__ import annotations

import json

from scalerl.env.sources.generators import families_at, generate
from scalerl.env.sources.generators.if_tasks import IF_FAMILIES
from scalerl.env.sources.prepare import check_records
from scalerl.verifiers.ifeval.reference import parse_reference


def test_same_seed_same_records_and_shorter_count_is_a_prefix():
    first = generate("if", seed=4, count=60, level=2)
    assert [r.model_dump() for r in first] == [r.model_dump() for r in generate("if", seed=4, count=60, level=2)]
    assert [r.model_dump() for r in generate("if", seed=4, count=20, level=2)] == [r.model_dump() for r in first[:20]]


def test_level0_is_a_short_request_naming_its_words_with_a_short_answer():
    records = generate("if", seed=0, count=500, level=0)
    for record in records:
        assert record.domain == "if" and record.source == "gen-if"
        assert len(record.prompt[0].content) < 60, record.prompt[0].content
        assert len(record.metadata["solution"]) <= 16, record.metadata["solution"]
        names = [name for name, _ in parse_reference(record.answer)]
        assert len(names) <= 2 and names[-1] == "keywords:existence"  # random text does not pass
    assert {r.metadata["task"] for r in records} == {f.name for f in families_at("if", 0)}


def test_levels_unlock_families_and_every_family_is_drawn():
    counts = [len(families_at("if", level)) for level in range(4)]
    assert counts == sorted(counts) and counts[0] < counts[1] < counts[2]
    drawn = {r.metadata["task"] for r in generate("if", seed=1, count=600, level=2)}
    assert drawn == set(IF_FAMILIES)
    multi = [r for r in generate("if", seed=1, count=200, level=2) if len(json.loads(r.answer)["kwargs"]) > 1]
    assert multi, "level 2 has requests with several constraints"


def test_gold_responses_are_correct_with_the_real_verifier():
    records = [r for seed in range(40) for level in range(4) for r in generate("if", seed=seed, count=6, level=level)]
    report = check_records(records)
    assert report.checked == len(records) == 960
    assert report.failures == [], report.failures[:5]


def test_random_text_rarely_follows_a_level0_request():
    """A policy that ignores the request (random printable text, as an untrained model writes) is rewarded
    for almost none of them: every level-0 request names the words to use."""
    import random

    rng = random.Random(0)
    records = generate("if", seed=2, count=300, level=0)
    garbage = ["".join(rng.choice(" abcdefghijklmnopqrstuvwxyzABC,.\"'") for _ in range(rng.randint(1, 60)))
               for _ in records]
    solved = [r.model_copy(update={"metadata": {**r.metadata, "solution": g}}) for r, g in zip(records, garbage)]
    assert check_records(solved).correct <= 6  # 2 %
