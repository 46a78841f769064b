"""`TrainConfig`: the one source of truth for every default of `scalerl train`.

It composes the trainer-core configs (`LossConfig`, `AdvantageConfig`, `OptimConfig`, `LengthConfig`
from `scalerl.trainer.core.recipe_config`), the verifier config (`scalerl.verifiers.verifier_config`) and the
pieces this module owns (pipeline, engine, data, validation, warm start, checkpoints). Load with
`scalerl.env.contracts.config_loader.load_config(TrainConfig, yaml, overrides)`; unknown keys are errors
naming the dotted path.

Departures from the paper's defaults, all because the class defaults *are* the built-in CPU default
(a ~0.8 M-parameter character model on 2 cores); `--preset paper` (`scalerl.trainer.config.presets`) sets them
back, and every preset says only what it changes:
- 16 prompts x 8 samples per step (paper 48 x 16): more updates per CPU-second; AdamW lr 1e-4 with
  20 warm-up steps (paper 5e-7, 100): the tiny model needs a far larger step and the run is short.
- The RL phase stops after `pipeline.max_time_s` = 150 s (or `max_steps`), so `make demo` fits in
  ~10 minutes on 2 cores including a cached-or-fresh warm start; set it to null for a step-bound run.
- Interruption budgets of 40–48 tokens + 16 after a short phrase (paper 10k–12k + 2k with a long
  phrase): the completions are ~10–45 characters.
Everything else (CISPO with eps_max 5, prompt aggregation, batch normalization, FP32 head, zero-
variance filtering, no-positive resampling at 0.9, PipelineRL with k = 8) is the paper's.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator
from scalerl.curriculum.ledger.ledger_config import LedgerConfig
from scalerl.curriculum.ledger.retirement import RetirementConfig
from scalerl.curriculum.strategy_config import StageConfig, StrategyConfig
from scalerl.env.contracts import episodes as registry
from scalerl.env.contracts.domains import default_domains, domain_names
from scalerl.env.contracts.episodes import EpisodeLimits
from scalerl.env.contracts.records import Strict
from scalerl.trainer.config.data import PromptsConfig, RolloutLogConfig, SourceConfig
from scalerl.trainer.core.length_control import output_budget, stage_length
from scalerl.trainer.core.lora_config import LoraConfig
from scalerl.trainer.core.recipe_config import AdvantageConfig, LengthConfig, LossConfig, OptimConfig
from scalerl.trainer.distributed.placement_config import RayConfig, TrainerRanksConfig
from scalerl.trainer.engines.engine_config import EngineConfig, EngineSpec
from scalerl.trainer.memory.plan_inputs import PlanInputs
from scalerl.trainer.tiny.tiny_config import TinyModelConfig, WarmStartConfig
from scalerl.verifiers.verifier_config import VerifierConfig

ComputeAxis = Literal["device_s", "samples", "tokens", "flops"]
"""The compute axes a budget and a fit can use (counted by `scalerl.trainer.run.compute.ComputeClock`)."""


class PipelineConfig(Strict):
    """How generation and training overlap (PipelineRL-k, PPO-off-policy-k or synchronous)."""

    GONE = {"budget_device_s": "use pipeline.budget=<N> with pipeline.budget_axis=device_s (or samples, tokens, flops)"}

    mode: Literal["pipeline", "ppo-offpolicy"] = Field(
        default="pipeline", description="pipeline: PipelineRL-k; ppo-offpolicy: k batches per policy, then k updates")
    k: int = Field(default=8, description="max policy lag in steps (pipeline); batches per policy (ppo-offpolicy)")
    prompts_per_step: int = Field(default=16, ge=1, description="groups per optimizer step (paper 48)")
    samples_per_prompt: int = Field(default=8, ge=2, description="group size (paper 16)")
    max_steps: int = Field(default=400, ge=1)
    max_time_s: float | None = Field(
        default=150.0, gt=0, description="stop the RL phase after this wall time (checked per step); null = no limit")
    budget: float | None = Field(
        default=None, gt=0, description="stop the RL phase at the first step whose compute on `budget_axis` reaches "
        "this; null = no limit. `scalerl ablate` sets it")
    budget_axis: ComputeAxis = Field(
        default="device_s", description="device_s: wall s x devices in use (validation, checkpoints excluded; "
        "follows the load); samples / tokens: taken samples / their generated tokens; flops: generation + "
        "training (scalerl.trainer.run.compute)")
    seed: int = 0
    torch_threads: int = Field(default=1, ge=1, description="intra-op threads per torch thread (engine, trainer)")

    @field_validator("k")
    @classmethod
    def _k_non_negative(cls, k: int) -> int:
        if k < 0:
            raise ValueError(f"k must be >= 0 (0 = synchronous), got {k}")
        return k

    @model_validator(mode="after")
    def _offpolicy_k(self) -> PipelineConfig:
        if self.mode == "ppo-offpolicy" and self.k < 1:
            raise ValueError("ppo-offpolicy needs k >= 1 (k batches generated per policy)")
        return self


class DataConfig(Strict):
    """Procedural problems (`scalerl.env.sources.generators`): a training pool and a disjoint held-out set
    per domain."""

    level: int = Field(default=0, ge=0)
    generated_per_domain: int = Field(default=3000, ge=1, description="drawn from the generator, then deduplicated")
    holdout_fraction: float = Field(default=0.25, gt=0, lt=1, description="share of distinct prompts held out")
    holdout_max_prompts: int = Field(default=256, ge=1)
    domain_weights: dict[str, float] = Field(default_factory=dict, description="mixing weights; empty = equal")
    seed: int = 0
    sources: list[SourceConfig] = Field(
        default_factory=list, description="problem files or generators per domain (scalerl.trainer.run.data_sources); "
        "empty = the generator for every domain with level/generated_per_domain/seed above")
    heldout: dict[str, list[str]] = Field(
        default_factory=dict, description="held-out files per domain; a domain without = split from its training data")


class CurriculumConfig(StrategyConfig):
    """ScaleRL's curriculum (zero-variance filtering, retirement in the ledger) and the switchable
    strategies of `scalerl.curriculum.strategy_config` (docs/curriculum.md)."""

    # One switch per behaviour: filtering is `zero_variance.mode` (keep = the paper's ablation).
    GONE = {"zero_variance_filter": "use curriculum.zero_variance.mode=keep (no filtering) or =shrink (the default)"}

    retirement: RetirementConfig = Field(
        default_factory=RetirementConfig, description="no-positive resampling: retire at pass rate >= 0.9")



class ValidationConfig(Strict):
    enabled: bool = Field(default=True, description="off: no held-out evaluation and no curves (benchmarks)")
    every_steps: int = Field(default=15, ge=1)
    min_evaluations_per_domain: int = Field(
        default=256, ge=1, description="held-out samples per domain (each held-out prompt sampled equally often)")
    greedy: bool = Field(default=False, description="also report greedy pass rates (temperature -> argmax)")
    fit_at_end: bool = True


class CheckpointConfig(Strict):
    every_steps: int = Field(default=50, ge=1)
    keep_last: int | None = Field(
        default=None, ge=1, description="after each save, delete all but the newest N `step_*` folders (the one "
        "`latest` names always stays); null keeps every checkpoint")


class LoggingConfig(Strict):
    wandb: bool = False
    tensorboard: bool = False
    progress: Literal["auto", "rich", "lines"] = "auto"


class TrainConfig(Strict):
    domains: list[str] = Field(default_factory=default_domains, min_length=1)
    environments: list[str] = Field(
        default_factory=list, description="multi-turn environments (the scalerl.environments registry) that play "
        "the problems of their domain as episodes, one per domain; an environment named in `domains` moves here "
        "and its domain takes its place there (docs/environments.md)")
    episode_limits: EpisodeLimits | None = Field(
        default=None, description="the limits of every episode the run plays, as a whole (a key not set takes the "
        "contract's default); null = each environment's own")
    model: str | None = Field(default=None, description="HF folder or hub id; None = the built-in tiny model")
    tiny: TinyModelConfig = Field(default_factory=TinyModelConfig)
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    curriculum: CurriculumConfig = Field(default_factory=CurriculumConfig)
    ledger: LedgerConfig = Field(default_factory=LedgerConfig, description="what the ledger keeps beyond verdicts")
    loss: LossConfig = Field(default_factory=LossConfig)
    advantages: AdvantageConfig = Field(default_factory=AdvantageConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    length: LengthConfig = Field(default_factory=LengthConfig)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    validation: ValidationConfig = Field(default_factory=ValidationConfig)
    warm_start: WarmStartConfig = Field(default_factory=WarmStartConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    ray: RayConfig = Field(default_factory=RayConfig, description="Ray actors instead of one process")
    prompts: PromptsConfig = Field(default_factory=PromptsConfig, description="per-domain prompt template")
    rollout_log: RolloutLogConfig = Field(default_factory=RolloutLogConfig, description="rollouts.jsonl")
    trainer_ranks: TrainerRanksConfig = Field(
        default_factory=TrainerRanksConfig, description="data-parallel trainer ranks (FSDP2), 1 = one process")
    lora: LoraConfig = Field(default_factory=LoraConfig,
                             description="LoRA adapters (scalerl.trainer.core.lora); off by default")

    def engine_spec(self) -> EngineSpec:
        """What building a generation engine reads (`scalerl.trainer.engines.factory`, the generator actors)."""
        return EngineSpec(engine=self.engine, fp32_head=self.optim.fp32_head, lora=self.lora, model=self.model,
                          tiny=self.tiny, torch_threads=self.pipeline.torch_threads)

    def plan_inputs(self) -> PlanInputs:
        """What the memory plan reads (`scalerl.trainer.memory.plan`, `scalerl.trainer.memory.preflight`)."""
        return PlanInputs(model=self.model, engine=self.engine, optim=self.optim, trainer_ranks=self.trainer_ranks,
                          ray=self.ray, lora=self.lora, validation_enabled=self.validation.enabled)

    def environment_by_domain(self) -> dict[str, str]:
        """The environment that plays each domain's problems as episodes, by domain."""
        return {registry.environment(name).domain: name for name in self.environments}

    @model_validator(mode="before")
    @classmethod
    def _environments_in_domains(cls, data: object) -> object:
        """`domains` may name environments: each moves to `environments`, its domain takes its place."""
        names = data.get("domains") if isinstance(data, dict) else None
        if not isinstance(names, list) or all(n in domain_names() for n in names):
            return data
        envs = registry.environments()
        moved = [n for n in names if n not in domain_names() and n in envs]
        for name in moved:
            if envs[name].domain in names:
                raise ValueError(f"domains names both {envs[name].domain!r} and {name!r}, which plays "
                                 f"{envs[name].domain}'s problems as episodes: name one of them")
        domains = [envs[n].domain if n in moved else n for n in names]
        return {**data, "domains": domains, "environments": [*data.get("environments", []), *moved]}

    @field_validator("domains")
    @classmethod
    def _known_domains(cls, domains: list[str]) -> list[str]:
        unknown = [d for d in domains if d not in domain_names()]
        if unknown:
            raise ValueError(f"unknown domain(s) or environment(s) {unknown}; domains: {list(domain_names())}; "
                             f"environments: {list(registry.environments())}")
        if len(set(domains)) != len(domains):
            raise ValueError(f"domains repeat: {domains}")
        return domains

    @field_validator("environments")
    @classmethod
    def _known_environments(cls, names: list[str]) -> list[str]:
        for name in names:
            registry.environment(name)  # UnknownEnvironmentError (a ValueError) lists the installed ones
        domains = [registry.environment(n).domain for n in names]
        if len(set(domains)) != len(domains):
            raise ValueError(f"environments {names} play one domain twice (one environment per domain)")
        return names

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        untrained = [d for d in self.environment_by_domain() if d not in self.domains]
        if untrained:
            raise ValueError(f"environments play domains not trained: {untrained} (add them to domains)")
        extra = set(self.data.domain_weights) - set(self.domains)
        if extra:
            raise ValueError(f"data.domain_weights names domains not trained: {sorted(extra)}")
        if any(w < 0 for w in self.data.domain_weights.values()):
            raise ValueError("data.domain_weights must be >= 0")
        if any(w < 0 for w in self.warm_start.domain_weights.values()) or not any(
                self.warm_start.domain_weights.get(d, 1.0) > 0 for d in self.domains):
            raise ValueError("warm_start.domain_weights must be >= 0 with a positive weight for a trained domain")
        if any(n < 1 for n in self.warm_start.batch_size_by_domain.values()):
            raise ValueError("warm_start.batch_size_by_domain values must be >= 1")
        self.prompts = self.prompts.with_domains(self.domains)  # every trained domain's template is shown
        length = self.length
        if length.mode == "penalty" and (length.max_response_tokens or 0) > self.engine.max_new_tokens:
            raise ValueError(f"length.max_response_tokens={length.max_response_tokens} exceeds engine.max_new_tokens="
                             f"{self.engine.max_new_tokens}: sampling stops first, so the penalty would never apply")
        for i, stage in enumerate(self.curriculum.stages):
            self._stage_budgets(i, stage)
        return self

    def _stage_budgets(self, i: int, stage: StageConfig) -> None:
        """A stage's resolved budgets are ordered and leave room for a prompt in `engine.max_seq_len` (the
        phrase counted as one token; `scalerl.trainer.rollout.prompts` checks again with the tokenizer's lengths)."""
        length, max_new = stage_length(self.length, self.engine.max_new_tokens, stage)

        def src(name: str) -> str:
            own = "engine" if name == "max_new_tokens" else "length"
            return f"curriculum.stages[{i}].{name}" if getattr(stage, name) is not None else f"{own}.{name}"

        lo, hi = length.think_budget_min_tokens, length.think_budget_max_tokens
        if lo > hi:
            raise ValueError(f"{src('think_budget_min_tokens')}={lo} exceeds {src('think_budget_max_tokens')}={hi}")
        if length.mode == "penalty" and (length.max_response_tokens or 0) > max_new:
            raise ValueError(f"length.max_response_tokens={length.max_response_tokens} exceeds "
                             f"{src('max_new_tokens')}={max_new}: sampling stops first, so the penalty would never "
                             "apply in that stage")
        budget = output_budget(length, max_new, phrase_tokens=1)
        if budget >= self.engine.max_seq_len:
            names = ("think_budget_max_tokens", "answer_budget_tokens") if length.mode == "interrupt" else (
                "max_new_tokens",)
            raise ValueError(f"curriculum.stages[{i}]: completion budget {budget} ({' + '.join(map(src, names))}) "
                             f"leaves no room for a prompt in engine.max_seq_len={self.engine.max_seq_len}")
