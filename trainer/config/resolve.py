"""The resolved `TrainConfig` of a run, from what a user gives: file, preset, flags, dotted overrides.

`resolve_config` is what `scalerl train`, `scalerl profile` and `scalerl ablate` resolve a run with, so a
study's run gets exactly the configuration the same flags give on the command line; it also returns the
named layers, so `--print-config` can say which one set each value. The flags that set configuration
values are one typed model (`RunFlags`), each a dotted override of the `flag` layer. Bad input raises
`ConfigError` naming the key, before any weight is loaded; so does a `--model` that is neither a folder
nor a hub id in the local Hugging Face cache (`check_model_path`), and `--engine vllm` without vLLM.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field
from scalerl.env.contracts.config_loader import ConfigError, Layer, file_layer, load_layers, override_layer
from scalerl.env.contracts.records import Strict
from scalerl.trainer.config.data_flags import data_overrides
from scalerl.trainer.config.presets import IMPLIED_BY_MODEL, model_preset_values, preset_values
from scalerl.trainer.config.train import TrainConfig

log = logging.getLogger(__name__)


class RunFlags(Strict):
    """The command-line flags that set configuration values (None: not given); `overrides()` turns them
    into the dotted overrides of the `flag` layer, below the user's own overrides."""

    domains: str | None = Field(default=None, description="comma-separated, e.g. math,code")
    model: str | None = None
    engine: str | None = Field(default=None, description="engine.name")
    max_steps: int | None = Field(default=None, description="pipeline.max_steps")
    trainer_ranks: int | None = Field(default=None, description="trainer_ranks.count")
    ray: bool = Field(default=False, description="ray.enabled")
    ray_address: str | None = Field(default=None, description="ray.address (implies ray)")
    data: list[str] | None = Field(default=None, description="--data DOMAIN=FILE[,FILE...][@WEIGHT]")
    heldout: list[str] | None = Field(default=None, description="--heldout DOMAIN=FILE[,FILE...]")

    def overrides(self) -> list[str]:
        """The flags as dotted overrides."""
        flags = data_overrides(self.data or [], self.heldout or [], domains_given=self.domains is not None)
        if self.domains is not None:
            flags.append("domains=[" + ",".join(d.strip() for d in self.domains.split(",") if d.strip()) + "]")
        if self.model is not None:
            flags.append(f"model={json.dumps(self.model)}")
        if self.engine is not None:
            flags.append(f"engine.name={self.engine}")
        if self.max_steps is not None:
            flags.append(f"pipeline.max_steps={self.max_steps}")
        if self.trainer_ranks is not None:
            flags.append(f"trainer_ranks.count={self.trainer_ranks}")
        if self.ray or self.ray_address is not None:
            flags.append("ray.enabled=true")
        if self.ray_address is not None:
            flags.append(f"ray.address={json.dumps(self.ray_address)}")
        return flags


def resolve_config(config: Path | None = None, overrides: Sequence[str] = (), flags: RunFlags | None = None, *,
                   resume: Path | None = None, preset: str | None = None,
                   study_preset: str | None = None) -> tuple[TrainConfig, list[Layer]]:
    """(`TrainConfig`, its layers): defaults → preset → study preset → YAML → flags → overrides (on resume:
    the run's own config.yaml, then flags and overrides). `flags.model` without `preset`, `config` or
    `resume` on a cpu engine: `IMPLIED_BY_MODEL`'s values (all but the model) in place of the preset."""
    flags = flags or RunFlags()
    if resume is not None:
        if config is not None:
            raise ConfigError("--resume uses the run's own config.yaml; do not pass --config")
        config = resume / "config.yaml"
        if not config.is_file():
            raise ConfigError(f"--resume {resume}: no config.yaml there (not a run folder)")
        if preset is not None:
            raise ConfigError("--resume uses the run's own config.yaml; do not pass --preset")
    study = [Layer(f"preset {study_preset}", preset_values(study_preset))] if study_preset else []
    after = [*study, *([file_layer(config)] if config is not None else []),
             override_layer(flags.overrides(), "flag"), override_layer(list(overrides))]
    layers = [Layer(f"preset {preset}", preset_values(preset, **_mix_flags(flags))), *after] if preset else after
    cfg = load_layers(TrainConfig, layers)
    if flags.model is not None and preset is None and config is None:
        cfg, layers = _implied_by_model(cfg, layers, after, flags)
    _check_available(cfg)
    return cfg, layers


def _mix_flags(flags: RunFlags) -> dict:
    """What a preset's training mix depends on: whether `--data` is given, the `--domains` named."""
    domains = None if flags.domains is None else [d.strip() for d in flags.domains.split(",") if d.strip()]
    return {"data_given": bool(flags.data), "domains": domains}


def _implied_by_model(cfg: TrainConfig, layers: list[Layer], after: list[Layer],
                      flags: RunFlags) -> tuple[TrainConfig, list[Layer]]:
    """On a cpu engine, `IMPLIED_BY_MODEL`'s values under the later layers; elsewhere a warning."""
    from scalerl.trainer.engines.device import resolve_device

    if resolve_device(cfg.engine.device) != "cpu":
        log.warning("--model without --preset or --config keeps the tiny model's budgets (%d + %d tokens, "
                    "engine.max_seq_len %d); for a real model on %s start from --preset paper",
                    cfg.length.think_budget_max_tokens, cfg.length.answer_budget_tokens,
                    cfg.engine.max_seq_len, cfg.engine.device)
        return cfg, layers
    layers = [Layer(f"preset {IMPLIED_BY_MODEL} (implied by --model)", model_preset_values(**_mix_flags(flags))),
              *after]
    cfg = load_layers(TrainConfig, layers)
    log.info("--model without --preset or --config on cpu: using --preset %s's values (budgets %d-%d + %d "
             "tokens, engine.max_seq_len %d) with model %s", IMPLIED_BY_MODEL,
             cfg.length.think_budget_min_tokens, cfg.length.think_budget_max_tokens,
             cfg.length.answer_budget_tokens, cfg.engine.max_seq_len, cfg.model)
    return cfg, layers


def check_model_path(model: str | None) -> None:
    """A local folder, or a hub id already in the local HF cache (nothing downloads at run time)."""
    from scalerl.trainer.engines.model_loading import ALIASES, alias_file, is_local_model

    if model is None:
        return
    if model in ALIASES:
        alias_file(model)  # raises when the package that ships it is not installed
    elif not is_local_model(model):
        raise ConfigError(f"--model {model!r}: no such folder or .gguf file, and not a Hugging Face model in the "
                          f"local cache (aliases: {', '.join(ALIASES)})")


def _check_available(cfg: TrainConfig) -> None:
    """What the configuration names exists here: the vLLM engine, the model folder."""
    if cfg.engine.name == "vllm":
        try:
            import vllm  # noqa: F401 - installed by `make vllm-env` (.venv-vllm)
        except ImportError as exc:
            raise ConfigError(f"--engine vllm is not available here ({exc}); use --engine torch") from exc
    check_model_path(cfg.model)
