"""The resolved `TrainConfig` of a run, from what a user gives: file, preset, flags, dotted overrides.

`build_config` is what `scalerl train`, `scalerl profile` and `scalerl ablate` resolve a run with, so a
study's run gets exactly the configuration the same flags give on the command line; `resolve_layers`
also returns the named layers, so `--print-config` can say which one set each value. Bad input raises
`ConfigError` naming the key, before any weight is loaded.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger(__name__)


def build_config(config: Path | None, overrides: list[str], *, domains: str | None, model: str | None,
                 engine: str | None, max_steps: int | None, resume: Path | None, ray: bool = False,
                 ray_address: str | None = None, trainer_ranks: int | None = None, preset: str | None = None,
                 data: list[str] | None = None, heldout: list[str] | None = None, study_preset: str | None = None):
    """The resolved `TrainConfig` (see `resolve_layers` for the order of the layers)."""
    return resolve_layers(config, overrides, domains=domains, model=model, engine=engine, max_steps=max_steps,
                          resume=resume, ray=ray, ray_address=ray_address, trainer_ranks=trainer_ranks,
                          preset=preset, data=data, heldout=heldout, study_preset=study_preset)[0]


def resolve_layers(config: Path | None, overrides: list[str], *, domains: str | None, model: str | None,
                   engine: str | None, max_steps: int | None, resume: Path | None, ray: bool = False,
                   ray_address: str | None = None, trainer_ranks: int | None = None, preset: str | None = None,
                   data: list[str] | None = None, heldout: list[str] | None = None, study_preset: str | None = None):
    """(`TrainConfig`, its layers): defaults → preset → study preset → YAML → flags → overrides (on resume:
    the run's own config.yaml, then flags and overrides). `model` without `preset`, `config` or `resume` on
    a cpu engine: `IMPLIED_BY_MODEL`'s values (all but the model) in place of the preset."""
    from scalerl.env.contracts.config import ConfigError, Layer, file_layer, load_layers, override_layer
    from scalerl.trainer.config.presets import IMPLIED_BY_MODEL, model_preset_values, preset_values
    from scalerl.trainer.config.train import TrainConfig

    if resume is not None:
        if config is not None:
            raise ConfigError("--resume uses the run's own config.yaml; do not pass --config")
        config = resume / "config.yaml"
        if not config.is_file():
            raise ConfigError(f"--resume {resume}: no config.yaml there (not a run folder)")
        if preset is not None:
            raise ConfigError("--resume uses the run's own config.yaml; do not pass --preset")
    flags = _flag_overrides(domains=domains, model=model, engine=engine, max_steps=max_steps, ray=ray,
                            ray_address=ray_address, trainer_ranks=trainer_ranks, data=data, heldout=heldout)
    study = [Layer(f"preset {study_preset}", preset_values(study_preset))] if study_preset else []
    after = [*study, *([file_layer(config)] if config is not None else []),
             override_layer(flags, "flag"), override_layer(overrides)]
    layers = [Layer(f"preset {preset}", preset_values(preset)), *after] if preset else after
    cfg = load_layers(TrainConfig, layers)
    if model is not None and preset is None and config is None:
        from scalerl.trainer.engines.device import resolve_device

        if resolve_device(cfg.engine.device) == "cpu":
            layers = [Layer(f"preset {IMPLIED_BY_MODEL} (implied by --model)", model_preset_values()), *after]
            cfg = load_layers(TrainConfig, layers)
            log.info("--model without --preset or --config on cpu: using --preset %s's values (budgets %d-%d + %d "
                     "tokens, engine.max_seq_len %d) with model %s", IMPLIED_BY_MODEL,
                     cfg.length.think_budget_min_tokens, cfg.length.think_budget_max_tokens,
                     cfg.length.answer_budget_tokens, cfg.engine.max_seq_len, cfg.model)
        else:
            log.warning("--model without --preset or --config keeps the tiny model's budgets (%d + %d tokens, "
                        "engine.max_seq_len %d); for a real model on %s start from --preset paper",
                        cfg.length.think_budget_max_tokens, cfg.length.answer_budget_tokens,
                        cfg.engine.max_seq_len, cfg.engine.device)
    _check_available(cfg)
    return cfg, layers


def _flag_overrides(*, domains: str | None, model: str | None, engine: str | None, max_steps: int | None,
                    ray: bool, ray_address: str | None, trainer_ranks: int | None, data: list[str] | None,
                    heldout: list[str] | None) -> list[str]:
    """The command-line flags as dotted overrides (their own layer, below the user's overrides)."""
    from scalerl.trainer.config.data_flags import data_overrides

    flags = data_overrides(data or [], heldout or [], domains_given=domains is not None)
    if domains is not None:
        flags.append("domains=[" + ",".join(d.strip() for d in domains.split(",") if d.strip()) + "]")
    if model is not None:
        flags.append(f"model={json.dumps(model)}")
    if engine is not None:
        flags.append(f"engine.name={engine}")
    if max_steps is not None:
        flags.append(f"pipeline.max_steps={max_steps}")
    if trainer_ranks is not None:
        flags.append(f"trainer_ranks.count={trainer_ranks}")
    if ray or ray_address is not None:
        flags.append("ray.enabled=true")
    if ray_address is not None:
        flags.append(f"ray.address={json.dumps(ray_address)}")
    return flags


def _check_available(cfg) -> None:
    """What the configuration names exists here: the vLLM engine, the model folder."""
    from scalerl.env.contracts.config import ConfigError
    from scalerl.trainer.run.setup import check_model_path

    if cfg.engine.name == "vllm":
        try:
            import vllm  # noqa: F401 - installed by `make vllm-env` (.venv-vllm)
        except ImportError as exc:
            raise ConfigError(f"--engine vllm is not available here ({exc}); use --engine torch") from exc
    check_model_path(cfg.model)
