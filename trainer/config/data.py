"""Config of what the trainer trains on and how problems become prompts (config only: no torch, no I/O).

`SourceConfig` is one entry of `data.sources`: problem files (verl parquet, as `scalerl-env data prepare`
and `data generate` write them) or the procedural generator, for one domain, with a mixing weight.
`PromptsConfig` is the per-domain prompt template applied on top of each record's own messages.
`RolloutLogConfig` bounds the sample of completions kept in `rollouts.jsonl`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from scalerl.env.contracts.domains import PromptDefaults, check_domain_name, domain, domains
from scalerl.env.contracts.records import Domain, Strict


class SourceConfig(Strict):
    domain: Domain
    kind: Literal["files", "generator"] = "files"
    files: list[str] = Field(default_factory=list, description="verl parquet files (kind = files)")
    weight: float = Field(default=1.0, ge=0, allow_inf_nan=False,
                          description="mixing weight: the source's share of its domain's draws is its share of the "
                          "domain's source weights; a domain's weight is its sources' sum")
    limit: int | None = Field(default=None, ge=1, description="keep the first N distinct problems of the source")
    level: int = Field(default=0, ge=0, description="generator difficulty (kind = generator)")
    count: int = Field(default=3000, ge=1, description="generated, then deduplicated (kind = generator)")
    seed: int = Field(default=0, description="generator seed (kind = generator)")
    families: list[str] = Field(default_factory=list, description="only these generator families of the level "
                                "(kind = generator); empty = all of the level's")

    @model_validator(mode="after")
    def _files_match_kind(self) -> SourceConfig:
        if self.kind == "files" and not self.files:
            raise ValueError(f"a {self.domain} source of kind 'files' needs at least one file")
        if self.kind == "generator" and self.files:
            raise ValueError("a generator source takes no files")
        if self.kind == "files" and self.families:
            raise ValueError("families choose generator families; a files source takes none")
        return self


class PromptsConfig(Strict):
    """Per-domain template, one section per domain (`prompts.math`, `prompts.code`, ...): a section's missing
    keys come from the domain's spec (`DomainSpec.prompt`), so a run overrides only what it names. The
    sections held are those given and those of the domains trained by default (`TrainConfig` adds its
    run's other domains), so installing a domain changes no run that does not train it; `for_domain`
    answers the spec's defaults for any other installed domain. `auto` applies the template (and the
    chat template) for Hugging Face tokenizers and leaves the built-in tiny model's bare prompts
    (`34+52=`) as they are."""

    model_config = ConfigDict(extra="allow")
    EXTRA_MODEL: ClassVar[type[BaseModel]] = PromptDefaults  # the type of every per-domain section
    __pydantic_extra__: dict[str, PromptDefaults] = Field(init=False)

    template: Literal["auto", "on", "off"] = "auto"

    @model_validator(mode="before")
    @classmethod
    def _domain_sections(cls, data: Any) -> Any:
        data = dict(data or {})
        for name in data:
            if name not in cls.model_fields:
                check_domain_name(name)
        for name, spec in domains().items():
            given = data.get(name)
            if not isinstance(given, PromptDefaults) and (name in data or spec.trains_by_default):
                data[name] = {**spec.prompt.model_dump(), **(given or {})}
        return data

    def for_domain(self, name: str) -> PromptDefaults:
        found = self.__pydantic_extra__.get(name)
        return found if found is not None else domain(name).prompt

    def with_domains(self, names: list[str]) -> PromptsConfig:
        """This template with a section (the spec's defaults) for each of `names` it lacks."""
        missing = [n for n in names if n not in self.__pydantic_extra__]
        if not missing:
            return self
        return PromptsConfig.model_validate({**self.model_dump(), **{n: {} for n in missing}})


class RolloutLogConfig(Strict):
    samples_per_step: int = Field(default=8, ge=0, description="completions kept in rollouts.jsonl per step")
    samples_per_validation: int = Field(default=16, ge=0, description="... per domain per validation")
    max_chars: int = Field(default=4000, ge=16, description="completion text is cut to this many characters")
    warn_after_steps: int = Field(default=3, ge=1, description="steps of ~all no_answer/unparsable before a warning")
    warn_fraction: float = Field(default=0.95, gt=0, le=1, description="share of format failures that counts")
