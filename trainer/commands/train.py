"""`scalerl train`: ScaleRL with PipelineRL-k on math and code, into a run folder.

Configuration: `TrainConfig` defaults → `--config FILE.yaml` → the flags below → dotted overrides
(`loss.eps_max=4 pipeline.k=4`). With no `--model` it runs the built-in CPU default (tiny model, warm
start, procedural level-0 math and code). `--model` without `--preset` and `--config` on a cpu engine
takes `--preset small-cpu`'s values (all but `model`), logged in one line. Bad configurations stop
before any work with exit code 2 and a message naming the key.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Annotated

import typer

log = logging.getLogger(__name__)

HELP = """Train with ScaleRL (CISPO, PipelineRL-k) on math and code, with real verifiers.

Examples:

  scalerl train                                   # the built-in CPU default (tiny model, ~10 min)

  scalerl train --domains math,code --max-steps 50 --out runs/try pipeline.k=4 loss.eps_max=4

  scalerl train --data math=gsm8k.parquet --data code=mbpp.parquet --preset small-cpu --dry-run

  scalerl train --model ./my-hf-model --config run.yaml --out runs/big

  scalerl train --model smollm2-135m-instruct     # on cpu: --preset small-cpu's budgets, this model

  scalerl train --data math=polaris.parquet@3 --data math=gsm8k.parquet   # 75 % / 25 % of math draws

  scalerl train --resume runs/try --max-steps 400

  scalerl train --print-config pipeline.k=4       # the resolved configuration, then exit

  scalerl train --trainer-ranks 2 --max-steps 20  # 2 trainer ranks (FSDP2)

  scalerl train --engine vllm --ray-address auto --config examples/multinode.yaml
"""


def build_config(config: Path | None, overrides: list[str], *, domains: str | None, model: str | None,
                 engine: str | None, max_steps: int | None, resume: Path | None, ray: bool = False,
                 ray_address: str | None = None, trainer_ranks: int | None = None, preset: str | None = None,
                 data: list[str] | None = None, heldout: list[str] | None = None):
    """The resolved `TrainConfig`: defaults → preset → YAML → flags → overrides (on resume: the run's own
    config.yaml, then flags and overrides). `model` without `preset`, `config` or `resume` on a cpu
    engine: `model_preset_values()` (small-cpu's, all but the model) in place of the preset."""
    from scalerl_env.contracts.config import ConfigError, load_config
    from trainer.commands.data_flags import data_overrides
    from trainer.config.presets import IMPLIED_BY_MODEL, model_preset_values, preset_values
    from trainer.config.train import TrainConfig

    if resume is not None:
        if config is not None:
            raise ConfigError("--resume uses the run's own config.yaml; do not pass --config")
        config = resume / "config.yaml"
        if not config.is_file():
            raise ConfigError(f"--resume {resume}: no config.yaml there (not a run folder)")
        if preset is not None:
            raise ConfigError("--resume uses the run's own config.yaml; do not pass --preset")
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
    cfg = load_config(TrainConfig, config, [*flags, *overrides], base=preset_values(preset))
    if model is not None and preset is None and config is None:
        from trainer.engines.device import resolve_device

        if resolve_device(cfg.engine.device) == "cpu":
            cfg = load_config(TrainConfig, None, [*flags, *overrides], base=model_preset_values())
            log.info("--model without --preset or --config on cpu: using --preset %s's values (budgets %d-%d + %d "
                     "tokens, engine.max_seq_len %d) with model %s", IMPLIED_BY_MODEL,
                     cfg.length.think_budget_min_tokens, cfg.length.think_budget_max_tokens,
                     cfg.length.answer_budget_tokens, cfg.engine.max_seq_len, cfg.model)
        else:
            log.warning("--model without --preset or --config keeps the tiny model's budgets (%d + %d tokens, "
                        "engine.max_seq_len %d); for a real model on %s start from --preset paper",
                        cfg.length.think_budget_max_tokens, cfg.length.answer_budget_tokens,
                        cfg.engine.max_seq_len, cfg.engine.device)
    if cfg.engine.name == "vllm":
        try:
            import vllm  # noqa: F401 - installed by `make vllm-env` (.venv-vllm)
        except ImportError as exc:
            raise ConfigError(f"--engine vllm is not available here ({exc}); use --engine torch") from exc
    from trainer.run.setup import check_model_path

    check_model_path(cfg.model)
    return cfg


def register(app: typer.Typer) -> None:
    """Add the `train` command to `app`."""

    @app.command("train", help=HELP)
    def train(
        overrides: Annotated[list[str] | None, typer.Argument(help="dotted overrides, e.g. pipeline.k=4")] = None,
        domains: Annotated[str | None, typer.Option(help="comma-separated: math,code (default both)")] = None,
        model: Annotated[str | None, typer.Option(
            help="HF folder, cached hub id, .gguf file or smollm2-135m-instruct; default: the tiny model. Without "
                 "--preset/--config on a cpu engine it takes --preset small-cpu's values (all but the model)")] = None,
        engine: Annotated[str | None, typer.Option(help="torch | vllm")] = None,
        config: Annotated[Path | None, typer.Option("--config", help="YAML file of TrainConfig values")] = None,
        out: Annotated[Path | None, typer.Option(help="run folder (default runs/train-<time>)")] = None,
        max_steps: Annotated[int | None, typer.Option(help="optimizer steps (pipeline.max_steps)")] = None,
        resume: Annotated[Path | None, typer.Option(help="continue the run in this folder")] = None,
        ray: Annotated[bool, typer.Option("--ray", help="run as Ray actors on a local cluster (ray.*)")] = False,
        ray_address: Annotated[str | None, typer.Option(help="join this Ray cluster ('auto'); implies --ray")] = None,
        trainer_ranks: Annotated[int | None, typer.Option(
            help="data-parallel trainer ranks, FSDP2 (trainer_ranks.count); resume may change it")] = None,
        print_config: Annotated[bool, typer.Option(
            "--print-config", help="print the fully resolved configuration as YAML and exit")] = False,
        preset: Annotated[str | None, typer.Option(
            help="tiny-cpu (default; small-cpu with --model on cpu) | small-cpu | paper")] = None,
        data: Annotated[list[str] | None, typer.Option(
            help="DOMAIN=FILE[,FILE...], optionally @WEIGHT: train on prepared parquet files (repeatable; one "
                 "source each, mixed within the domain by WEIGHT, default 1)")] = None,
        heldout: Annotated[list[str] | None, typer.Option(
            help="DOMAIN=FILE[,FILE...]: held-out files (default: split from the training data)")] = None,
        dry_run: Annotated[bool, typer.Option(
            "--dry-run", help="load data and tokenizer, print counts and prompt lengths, exit")] = False,
    ) -> None:
        from scalerl_env.contracts.config import ConfigError

        try:
            cfg = build_config(config, overrides or [], domains=domains, model=model, engine=engine,
                               max_steps=max_steps, resume=resume, ray=ray, ray_address=ray_address,
                               trainer_ranks=trainer_ranks, preset=preset, data=data, heldout=heldout)
            if dry_run:
                from trainer.run.dry_run import dry_run_report

                typer.echo(dry_run_report(cfg))
                return
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        if print_config:
            from scalerl_env.contracts.config import dump_yaml

            typer.echo(dump_yaml(cfg), nl=False)
            return
        folder = resume or out or Path("runs") / time.strftime("train-%Y%m%d-%H%M%S")
        from trainer.run.loop import train as run_training

        if cfg.ray.enabled:  # the same loop inside a trainer actor
            from trainer.distributed.launch import run_in_ray as run_training
        try:
            summary = run_training(cfg, folder, resume=resume is not None)
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(render_summary(summary))


def render_summary(summary: dict) -> str:
    lines = [f"run folder: {summary['out']}  ({summary['steps']} steps, {summary['elapsed_s']:.0f} s)"]
    for domain, rates in summary.get("heldout_pass_rate", {}).items():
        lines.append(f"  held-out pass rate {domain}: {rates['first']:.3f} -> {rates['last']:.3f}")
    out = summary["out"]
    lines.append(f"  metrics: {out}/metrics.jsonl   curves: {out}/curves/   summary: {out}/summary.json")
    return "\n".join(lines)
