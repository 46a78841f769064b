"""Recipe variants of the leave-one-out study: each is a list of dotted `TrainConfig` overrides.

The registry `BUILTIN` holds `baseline` (the ScaleRL recipe as `TrainConfig` defines it: no
overrides) and the paper's seven leave-one-out variants (arXiv 2510.13786, §4, Fig. 7), each
reverting one component (`loo-lp`'s penalty budgets follow the run's `engine.max_new_tokens`, see
`LengthConfig.penalty_budget`). User variants come from YAML::

    variants:
      my-k4:
        description: PipelineRL-4 instead of 8
        overrides: [pipeline.k=4]

Guarantees: names are unique across built-in and user variants (a user variant may not shadow a
built-in); every run's overrides are validated against `TrainConfig` before any run starts
(`scalerl.trainer.ablate.study.plan`). Not guaranteed: that a variant changes behaviour on every setup — e.g. `loo-fp32`
is numerically a no-op when the whole model already runs in float32 (the CPU default).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import Field
from scalerl.curriculum.strategy_config import ABLATE_VARIANTS as CURRICULUM_TABLE
from scalerl.env.contracts.config_loader import ConfigError
from scalerl.env.contracts.records import Strict

BASELINE = "baseline"


class Variant(Strict):
    """One recipe: a name, what it changes, and the overrides it adds to every run's configuration."""

    name: str
    description: str
    paper_component: str = Field(default="", description="the ScaleRL component it reverts (built-ins)")
    overrides: list[str] = Field(default_factory=list, description="dotted TrainConfig overrides")


BUILTIN: dict[str, Variant] = {v.name: v for v in [
    Variant(name=BASELINE, description="the ScaleRL recipe (TrainConfig defaults)"),
    Variant(name="loo-dapo", paper_component="CISPO loss", overrides=["loss.name=dapo"],
            description="DAPO loss (PPO clip with clip-higher, eps_low/eps_high of LossConfig)"),
    Variant(name="loo-savg", paper_component="prompt-level loss aggregation", overrides=["loss.aggregation=sample"],
            description="sample-average loss aggregation"),
    Variant(name="loo-plan", paper_component="batch-level advantage normalization",
            overrides=["advantages.normalization=prompt"], description="prompt-level advantage normalization"),
    Variant(name="loo-batch", paper_component="zero-variance filtering",
            overrides=["curriculum.zero_variance.mode=keep", "advantages.std_includes_zero_variance=true"],
            description="no zero-variance filtering (batch std over every sample)"),
    Variant(name="loo-fp32", paper_component="FP32 LM head", overrides=["optim.fp32_head=false"],
            description="no FP32 head (logits in the model's dtype)"),
    # the penalty's L_max / L_cache default to the engine's max_new_tokens and a fifth of it
    # (`LengthConfig.penalty_budget`), so the budgets scale with the run's output budget
    Variant(name="loo-lp", paper_component="forced interruption", overrides=["length.mode=penalty"],
            description="length penalty instead of interruption (DAPO overlong penalty)"),
    Variant(name="loo-8op", paper_component="PipelineRL-8", overrides=["pipeline.mode=ppo-offpolicy", "pipeline.k=8"],
            description="PPO-off-policy-8 instead of PipelineRL-8"),
]}
PAPER_VARIANTS = [name for name in BUILTIN if name != BASELINE]
CURRICULUM_VARIANTS = list(CURRICULUM_TABLE)  # the curriculum strategies (docs/curriculum.md), not in the paper's set
BUILTIN.update({name: Variant(name=name, description=d, overrides=list(o))
                for name, (d, o) in CURRICULUM_TABLE.items()})


class _UserEntry(Strict):
    """One entry under `variants:` in the user's YAML file."""

    description: str = ""
    overrides: list[str] = Field(min_length=1)


def load_user_variants(path: Path) -> dict[str, Variant]:
    """User variants from YAML; a name that repeats a built-in is an error."""
    if not path.is_file():
        raise ConfigError(f"variants file {path} does not exist")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
        entries = {name: _UserEntry.model_validate(v) for name, v in (raw.get("variants") or {}).items()}
    except (yaml.YAMLError, AttributeError, ValueError) as exc:
        raise ConfigError(f"variants file {path}: {exc}") from None
    clash = sorted(set(entries) & set(BUILTIN))
    if clash:
        raise ConfigError(f"variants file {path}: {clash} repeat built-in variant names")
    return {name: Variant(name=name, description=e.description or " ".join(e.overrides), overrides=e.overrides)
            for name, e in entries.items()}


def resolve(names: list[str], user: dict[str, Variant] | None = None) -> list[Variant]:
    """The named variants in order, baseline first (the study needs it for the margin and deltas)."""
    user = user or {}
    known = {**BUILTIN, **user}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"unknown variant(s) {unknown}; known: {sorted(known)}")
    if len(set(names)) != len(names):
        raise ConfigError(f"variants repeat: {names}")
    ordered = [BASELINE] + [n for n in names if n != BASELINE]
    return [known[n] for n in ordered]


def overrides_for(variant: Variant) -> list[str]:
    """The dotted overrides `variant` adds to every run's configuration."""
    return list(variant.overrides)
