"""Procedural problem generators: seeded, unbounded, with difficulty levels; no download needed.

`generate(domain, seed=..., count=..., level=...)` returns `ProblemRecord`s whose `metadata` holds
`"solution"` (a gold completion the verifiers score `correct`: `\\boxed{...}` for math; for code a
fenced ```python block, at level 0 a one-line `def g(s): return ...`), `"task"` (the family name) and `"level"`.

Guarantees
- Deterministic: the same (domain, seed, count, level) gives the same records on any machine, and
  `generate(..., count=n)` is a prefix of `generate(..., count=m)` for n ≤ m (each item has its own
  RNG, seeded from (domain, level, seed, index) as a string; `random.Random` hashes string seeds
  with SHA-512, independent of `PYTHONHASHSEED`).
- Unbounded: any seed ≥ 0 and any level ≥ 0; higher levels widen operand ranges and unlock families.
- Level 0 is what a ~1M-parameter character-level model learns on 2 CPU cores in minutes:
  math two-digit `a+b` without carries and `a-b` without borrows (see `math_tasks`); code
  `g(s)` from two examples on random 3-4 letter strings, one of 9 string operations (reverse,
  upper, lower, swapcase, double, first+last, length, sorted, drop first), checked on the shown and
  two hidden strings. Recognizing the operation generalizes to unseen strings; linear functions
  (`f(x)=a*x+b` from three values), which the tiny model does not pass on held-out functions (it
  memorizes instead of subtracting), start at level 1. Level-0 prompts are
  under 60 characters and carry no instruction text (the tiny model's context is small).
- A level's draw can be narrowed to named families (`families=`): levels 4 and up hold the tasks stated
  in words (`arithmetic_words`, `word_problem`, `function_words`), drawn alone that way.
- `prompt_id` is `make_prompt_id("gen-<domain>", prompt text)`: the same prompt from two seeds is the
  same problem (its examples determine the answer) and gets the same id.

Non-guarantees: records are not deduplicated (level 0 has 3,960 distinct math prompts, so large
counts repeat; level-0 code prompts rarely repeat); the difficulty of a level is by construction,
not measured (`difficulty_prior` stays `None`).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scalerl.env.contracts.domains import domain as domain_spec
from scalerl.env.contracts.domains import domains
from scalerl.env.contracts.records import ProblemRecord, make_prompt_id

from .types import Generated


@dataclass(frozen=True)
class TaskFamily:
    """One family of generated problems: `make(rng, level)` builds one problem at `level`."""

    name: str
    domain: str
    min_level: int
    make: Callable[[random.Random, int], Generated]


@functools.cache
def generators() -> dict[str, TaskFamily]:
    """Every installed domain's families (its spec's `generator_families`), by family name."""
    out: dict[str, TaskFamily] = {}
    for name, spec in domains().items():
        for family, (min_level, make) in (spec.generator_families() if spec.generator_families else {}).items():
            if family in out:
                raise ValueError(f"generator family {family!r} is declared by {out[family].domain} and {name}")
            out[family] = TaskFamily(family, name, min_level, make)
    return out


def families_at(domain: str, level: int) -> list[TaskFamily]:
    """The families `generate` draws from at `level` (those whose `min_level` ≤ level), in a fixed order."""
    return [f for f in generators().values() if f.domain == domain and f.min_level <= level]


def generate(domain: str, *, seed: int, count: int, level: int = 0,
             families: Sequence[str] | None = None) -> list[ProblemRecord]:
    """`count` problems of `domain` at `level`, deterministic for `seed` (see the module docstring);
    `families` (names) draws only those of the level's families (ValueError for one not at `level`)."""
    if domain_spec(domain).generator_families is None:
        raise ValueError(f"domain {domain!r} has no generator")
    if count < 0 or level < 0 or seed < 0:
        raise ValueError(f"count, level and seed must be ≥ 0 (got {count}, {level}, {seed})")
    drawn = families_at(domain, level)
    if families:
        names = {f.name for f in drawn}
        if unknown := [n for n in families if n not in names]:
            raise ValueError(f"families {unknown} are not {domain} families at level {level}: {sorted(names)}")
        drawn = [f for f in drawn if f.name in families]
    families = drawn
    return [_one(domain, families, seed, level, index) for index in range(count)]


def _one(domain: str, families: list[TaskFamily], seed: int, level: int, index: int) -> ProblemRecord:
    rng = random.Random(f"scalerl-gen/{domain}/{level}/{seed}/{index}")
    family = rng.choice(families)
    item = family.make(rng, level)
    source = f"gen-{domain}"
    return ProblemRecord(
        prompt_id=make_prompt_id(source, item.prompt),
        domain=domain,
        source=source,
        prompt=[{"role": "user", "content": item.prompt}],
        answer=item.answer,
        tests=item.tests,
        metadata={"solution": item.solution, "task": family.name, "level": level, "seed": seed,
                  "index": index},
    )


__all__ = ["Generated", "TaskFamily", "families_at", "generate", "generators"]
