"""Settings of the built-in tiny model and its supervised warm start (config only, no torch)."""

from __future__ import annotations

from pydantic import Field, model_validator
from scalerl.env.contracts.domains import domains
from scalerl.env.contracts.records import Domain, Strict


def domains_with_generators() -> list[str]:
    """The installed domains whose spec has a problem generator (the built-ins: math, code, if), in rank order."""
    return [name for name, spec in domains().items() if spec.generator_families is not None]


class TinyModelConfig(Strict):
    """Size of the built-in model. Defaults: ~0.8 M parameters, learnable on 2 CPU cores."""

    hidden_size: int = Field(default=128, ge=32)
    num_layers: int = Field(default=4, ge=1)
    num_heads: int = Field(default=2, ge=1)
    head_dim: int = Field(default=64, ge=32, description="vLLM's CPU attention needs >= 32; 64 is safest")
    intermediate_size: int = Field(default=384, ge=8)
    max_position_embeddings: int = Field(default=512, ge=16)
    rope_theta: float = Field(default=10000.0, gt=0)
    seed: int = 0

    @model_validator(mode="after")
    def _heads_fit(self) -> TinyModelConfig:
        if self.num_heads * self.head_dim < self.hidden_size // 2:
            raise ValueError("num_heads * head_dim should be comparable to hidden_size")
        return self


class EpisodeWarmStartConfig(Strict):
    """A second supervised phase, for a run that plays environments: generator-made episodes (trainer.tiny.
    episode_warm_start), after the single-turn warm start and from its weights."""

    enabled: bool = Field(default=True, description="when the run plays environments (the tiny model only)")
    steps: int = Field(default=300, ge=0)
    batch_size: int = Field(default=32, ge=1, description="rows per batch")
    lr: float = Field(default=1e-3, gt=0)
    wrong_fraction: float = Field(default=0.6, ge=0, le=1, description="share of traces whose first submission "
                                  "is another problem's solution (the environment's feedback, then the right one)")
    max_problems: int = Field(default=512, ge=1, description="traces made: one per problem, the first of the "
                              "environment domain's training pool")
    single_turn_share: float = Field(default=0.25, ge=0, lt=1, description="share of batches drawn from the "
                                     "single-turn warm start's examples, so its domains are not forgotten")
    seed: int = 4321


class WarmStartConfig(Strict):
    """Short supervised phase on generator-made solutions, so the RL start is between 0 and 1."""

    enabled: bool = True
    domains: list[Domain] = Field(
        default_factory=domains_with_generators,
        description="learned whatever the run trains (a domain the run does not train: the generator's training "
        "pool at the run's data level, count and seed), so every subset of them starts from one warm start, the "
        "shipped one on the CPU default; a trained domain not named is learned as well. Default: every installed "
        "domain with a generator")
    steps: int = Field(default=1200, ge=0)
    batch_size: int = Field(default=128, ge=1, description="rows per supervised batch")
    batch_size_by_domain: dict[str, int] = Field(
        default_factory=lambda: {"code": 64},
        description="rows per batch for these domains (level-0 code rows are ~4x longer than math rows)")
    lr: float = Field(default=2e-3, gt=0)
    wrong_fraction: float = Field(default=0.4, ge=0, lt=1, description="share of deliberately wrong targets")
    domain_weights: dict[str, float] = Field(
        default_factory=lambda: {"math": 2.8},
        description="share of batches per domain (one domain per batch); a domain not named weighs 1")
    seed: int = 1234
    cache: bool = Field(default=True, description="reuse the result from the user cache folder")
    episodes: EpisodeWarmStartConfig = Field(default_factory=EpisodeWarmStartConfig)
