"""The domain registry: one `DomainSpec` per verifiable domain, found through the `scalerl.domains`
entry-point group.

A domain is everything the project needs to know to train on and score one kind of problem: the
reference field a record must carry (`answer` or `tests`) and how to check it, the verifier factory,
the prompt template (the one source of the domain's instruction: the trainer's `prompts.<name>`
defaults and `scalerl-env data prepare` read it), the procedural generator families, how a public
dataset's row becomes a reference, and how a verl `ability` names it. The built-in domains (math,
code, if) are declared in the project's own `pyproject.toml` exactly as a lab's package declares its own:

    [project.entry-points."scalerl.domains"]
    chem = "chem_rlvr.spec:SPEC"

Every site that needs a domain reads it from here; nothing else spells the set of domains.

Guarantees
- Loaded once per process, on first use (never at import): `domains()` is cached.
- Names are unique: two entry points naming one domain are an error naming both.
- `domain(name)` raises `UnknownDomainError` (a ValueError) that lists the known domains.

Not guaranteed: that a plug-in's hooks are sound; its verifier answers `error` verdicts for its own
failures as the built-in ones do only if it is written so.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field
from scalerl.env.contracts.plugins import load_specs

ENTRY_POINT_GROUP = "scalerl.domains"


class UnknownDomainError(ValueError):
    """A domain name that no installed spec declares."""


class DomainVerifier(Protocol):
    """What a domain's verifier gives the batch API (`scalerl.verifiers.batch.VerifierPool`).

    `submit` starts scoring `items` (all of this domain) and returns a function that waits for and
    returns one verdict per item, in order; the pool submits every domain of a batch before it
    collects any, so domains score concurrently. Model text never raises; a verifier failure is an
    `error` verdict. `info()` may carry `alive` (worker processes) and `kills` ({reason: count}).
    """

    def submit(self, items: Sequence[Any]) -> Callable[[], list[Any]]: ...

    def ready(self) -> bool: ...

    def info(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class PromptDefaults(BaseModel):
    """A domain's prompt template: `instruction` is appended to the last user message unless the text
    already holds `marker`; `system` (when set) goes first. A spec holds its defaults; a run's
    `prompts.<domain>` section is the same model with the keys it names overridden."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    system: str | None = Field(default=None, description="system message; None = the chat template's own")
    instruction: str = Field(default="", description="appended to the last user message unless `marker` is "
                             "already in it")
    marker: str = Field(default="", description="text whose presence means the record already carries an "
                        "instruction")


@dataclass(frozen=True)
class RowReference:
    """What a public dataset's row gives a problem record: the reference, a gold completion and the
    instruction that follows the problem text (empty: the spec's `prompt.instruction`)."""

    answer: str | None = None
    tests: Any = None
    solution: str | None = None
    instruction: str = ""


GeneratorFamily = tuple[int, Callable[[random.Random, int], Any]]  # (min_level, make(rng, level))


@dataclass(frozen=True)
class DomainSpec:
    """One verifiable domain (see the module docstring). Hooks are plain callables; the built-in specs'
    hooks import their domain's code when called, so loading the registry imports no verifier,
    sandbox or dataset code."""

    name: str
    reference: Literal["answer", "tests"]
    description: str
    verifier: Callable[[Any], DomainVerifier]  # VerifierConfig -> DomainVerifier
    verifier_config: Callable[[], type] | None = None  # the pydantic model of `verifier.<name>` (plug-ins)
    check_reference: Callable[[Any], None] | None = None  # raises ValueError on a reference it cannot score
    prompt: PromptDefaults = PromptDefaults()
    generator_families: Callable[[], Mapping[str, GeneratorFamily]] | None = None
    row_reference: Callable[[Any, dict[str, Any]], RowReference] | None = None  # (SourceManifest, row)
    verl_abilities: tuple[str, ...] = ()  # lower-case words of a verl `ability` that name this domain
    claims_reference: Callable[[Any], bool] | None = None  # an adapter's bare reference is this domain's
    rank: int = 100  # order in listings: the built-ins first
    trains_by_default: bool = True  # in `TrainConfig.domains` when the run names none
    options: Mapping[str, Any] = field(default_factory=dict)  # free-form, read by the domain's own hooks

    def check(self, record: Any, noun: str) -> None:
        """The one reference rule for items and problems: the field is present and the domain can read it."""
        value = getattr(record, self.reference)
        if value is None:
            raise ValueError(f"{self.name} {noun} need '{self.reference}'")
        if self.check_reference is not None:
            self.check_reference(value)


@functools.cache
def domains() -> dict[str, DomainSpec]:
    """Every installed domain, by name, in `rank` then name order."""
    return load_specs(ENTRY_POINT_GROUP, DomainSpec, "domain")


def domain_names() -> tuple[str, ...]:
    return tuple(domains())


def default_domains() -> list[str]:
    """The domains a run trains on when it names none: every installed one that asks to."""
    return [name for name, spec in domains().items() if spec.trains_by_default]


def domain(name: str) -> DomainSpec:
    specs = domains()
    if name not in specs:
        raise UnknownDomainError(f"unknown domain {name!r}; installed: {', '.join(specs) or '(none)'}")
    return specs[name]


def domain_for_ability(ability: str) -> DomainSpec | None:
    """The domain a verl `ability` names: the domain of that name, else the first (in rank order) one of
    whose `verl_abilities` words the ability contains; None when none does."""
    text = ability.strip().lower()
    specs = domains()
    if text in specs:
        return specs[text]
    return next((s for s in specs.values() if any(word in text for word in s.verl_abilities)), None)


def domain_of_reference(reference: Any) -> DomainSpec:
    """The domain of a bare reference handed to an adapter without a domain: the first whose
    `claims_reference` accepts it, else the first answer-string domain that claims nothing (math)."""
    specs = list(domains().values())
    claimed = next((s for s in specs if s.claims_reference is not None and s.claims_reference(reference)), None)
    fallback = next((s for s in specs if s.reference == "answer" and s.claims_reference is None), None)
    if claimed is None and fallback is None:
        raise UnknownDomainError(f"no installed domain takes the reference {reference!r}")
    return claimed or fallback  # type: ignore[return-value]


def check_domain_name(name: str) -> str:
    """Validator for a `domain` field: the name of an installed domain."""
    domain(name)
    return name
