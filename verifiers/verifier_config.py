"""Verifier settings: one pydantic model per built-in domain (`verifier.math`, `verifier.code`, `verifier.if`)
inside `VerifierConfig`, the one source of truth for every verifier default. A plug-in domain's section is
validated by its own spec's model (`DomainSpec.verifier_config`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from scalerl.env.contracts.domains import domain
from scalerl.env.contracts.records import RewardTable, Strict


class MathConfig(Strict):
    workers: int = Field(default=2, ge=1, le=64, description="persistent math-verify worker processes")
    timeout_s: float = Field(default=5.0, gt=0, description="hard per-item deadline; the worker is killed past it")
    max_completion_chars: int = Field(default=1_000_000, ge=1, description="longer completions are cut from the front")
    max_answer_chars: int = Field(default=1000, ge=1, description="extracted answers longer than this are unparsable")
    soft_timeout_fraction: float | None = Field(
        default=0.8, gt=0, le=1, description="the worker's own timer fires at this fraction of timeout_s "
        "(answers `timeout` without a kill when the work is interruptible); null = hard deadline only"
    )
    worker_memory_mb: int = Field(default=2048, ge=0, description="address-space limit per worker; 0 = none")
    fast_path: bool = Field(default=True, description="decide plain numbers exactly before sympy")
    dedupe: bool = Field(default=True, description="score identical (answer, extracted) pairs once per batch")
    question_forms: bool = Field(
        default=True, description="an item's `question` decides the answer forms a correct answer must be in "
        "(scalerl.verifiers.math.question); false: the value alone decides, as for an item without a question")
    guard_false_positives: bool = Field(
        default=True, description="reject math-verify 'equal' on float-free numbers whose values differ"
    )
    float_rounding: int = Field(default=6, ge=0, le=30, description="math-verify: decimals compared for floats")
    numeric_precision: int = Field(default=15, ge=1, le=100, description="math-verify: evalf digits")
    strict: bool = Field(default=True, description="math-verify: variable names matter")
    allow_set_relation_comp: bool = Field(default=False, description="math-verify: compare sets with relations")
    shape_rules: bool = Field(
        default=True, description="answer-shape rules around math-verify (choices, multi-part, intervals, "
        "degrees, units, words, rounded references, equations): verifiers/math/rules.py, forms.py"
    )
    answer_format: Literal["any", "boxed"] = Field(
        default="any", description="any: boxes, then final-answer phrases and a trailing math line; "
        "boxed: only a \\boxed{}/\\fbox{} counts, a missing box is no_answer (a format failure)"
    )
    second_opinion: float = Field(
        default=0.05, ge=0, le=1, description="share of negative verdicts (wrong, no_answer, unparsable, timeout) "
        "re-checked by plain math-verify on the whole completion, in the workers; a measurement, never a reward "
        "(scalerl.verifiers.second_opinion)")


class CodeConfig(Strict):
    sandbox: Literal["strict", "standard", "minimal"] = Field(
        default="strict", description="minimum isolation level; refuse to run below it"
    )
    slots: int = Field(default=2, ge=1, le=64, description="concurrent sandboxed executions")
    stop_at_first_failure: bool = Field(default=True, description="stop an item's tests at the first failure")
    max_output_bytes: int = Field(default=1 << 20, ge=1024, description="cap per stream; over it the run is killed")
    wall_factor: float = Field(
        default=3.0, ge=1.0, le=100.0,
        description="wall-clock deadline = time_s x wall_factor + 1 s; CPU time is the judge, so load "
        "on the machine does not fail honest programs",
    )
    max_code_chars: int = Field(default=100_000, ge=1, description="longer extracted programs are cut")
    max_tests: int = Field(default=1000, ge=1, description="tests beyond this many per item are not run")
    disk_mb: int = Field(default=64, ge=1, le=4096, description="per-run tmpfs working directory size")
    max_processes: int = Field(default=32, ge=1, le=4096, description="processes per run (rlimit and cgroup)")
    max_open_files: int = Field(default=256, ge=16, le=65536)
    max_file_mb: int = Field(default=16, ge=1, le=4096, description="largest file a program may write")
    stderr_tail_chars: int = Field(default=2000, ge=0, description="stderr kept in verdict details")
    disable_layers: list[str] = Field(
        default_factory=list, description="sandbox layers to switch off although available (e.g. ['seccomp'])"
    )
    second_opinion: float = Field(
        default=0.1, ge=0, le=1, description="share of timeout verdicts re-run with second_opinion_time_factor "
        "x the time limit; a measurement, never a reward (scalerl.verifiers.second_opinion)")
    second_opinion_time_factor: float = Field(
        default=4.0, gt=1, le=100, description="the re-run's limits.time_s = this x the item's, at most the "
        "largest an item may set (Limits.time_s)")


IfMode = Literal["strict", "loose"]  # IFEval's two ways to check a response (scalerl.verifiers.ifeval.constraints)


class IfConfig(Strict):
    """`verifier.if`: how instruction-following items are scored (scalerl.verifiers.ifeval.verifier)."""

    mode: IfMode = Field(default="strict", description="strict: the response as given; loose: IFEval's loose "
                         "variants too (first/last line removed, `*` removed)")
    reward: Literal["all", "fraction"] = Field(
        default="all", description="all: correct only when every constraint is followed (IFEval prompt-level); "
        "fraction: reward the share followed (instruction-level)")
    response_after: list[str] = Field(
        default_factory=lambda: ["</think>"],
        description="the response is the text after the last of these markers (reasoning is not scored)")
    max_completion_chars: int = Field(default=200_000, ge=1, description="longer completions are unparsable")
    second_opinion: float = Field(
        default=1.0, ge=0, le=1, description="share of wrong verdicts re-checked in IFEval's loose mode (already "
        "computed: re-checking all of them costs nothing); a measurement, never a reward")


class VerifierConfig(Strict):
    """The verifiers' settings: the built-in domains' sections typed here (`if` is a Python keyword, so its
    field is `if_`, read and written as `if`); an installed plug-in domain's section (`verifier.<name>`)
    is validated by its spec's `verifier_config` model. `section(name)` answers any domain's."""

    model_config = ConfigDict(extra="allow", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    math: MathConfig = Field(default_factory=MathConfig)
    code: CodeConfig = Field(default_factory=CodeConfig)
    if_: IfConfig = Field(default_factory=IfConfig, alias="if")
    rewards: RewardTable = Field(default_factory=RewardTable)

    @model_validator(mode="after")
    def _domain_sections(self) -> VerifierConfig:
        for name, value in (self.__pydantic_extra__ or {}).items():
            spec = domain(name)
            model = spec.verifier_config() if spec.verifier_config is not None else None
            if model is None:
                raise ValueError(f"domain {name!r} takes no verifier settings")
            self.__pydantic_extra__[name] = model.model_validate(value)
        return self

    def section(self, name: str) -> BaseModel | None:
        """Domain `name`'s settings: the typed field, the validated plug-in section, or its defaults."""
        typed = next((f for f, info in type(self).model_fields.items() if (info.alias or f) == name), None)
        if typed is not None:
            return getattr(self, typed)
        given = (self.__pydantic_extra__ or {}).get(name)
        if given is not None:
            return given
        spec = domain(name)
        return spec.verifier_config()() if spec.verifier_config is not None else None
