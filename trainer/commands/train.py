"""`scalerl train`: ScaleRL with PipelineRL-k on math and code (and `if` when named), into a run folder.

Configuration: `TrainConfig` defaults → `--preset NAME` → `--config FILE.yaml` → the flags below →
dotted overrides (`loss.eps_max=4 pipeline.k=4`); `--print-config` names the layer of each value.
With no `--model` it runs the built-in CPU default (tiny model, the shipped warm start, procedural
level-0 math and code; `--domains math,code,if` adds instruction following from the same warm start).
`--model` without `--preset` and `--config` on a cpu engine takes `--preset small-cpu`'s values (all
but `model`), logged in one line. Bad configurations stop before any work with exit code 2 and a
message naming the key.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Annotated

import typer

log = logging.getLogger(__name__)

HELP = """Train with ScaleRL (CISPO, PipelineRL-k) on math, code and if, with real verifiers.

Examples:

  scalerl train                                   # the built-in CPU default (tiny model, ~3 min)

  scalerl train --domains math,code,if            # instruction following (if) too

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


def domains_help() -> str:
    """The installed domains and the default ones, and the multi-turn environments, from the registries
    (plug-ins included)."""
    from scalerl.env.contracts.domains import default_domains, domain_names
    from scalerl.env.contracts.episodes import environments

    return (f"comma-separated, of: {','.join(domain_names())} (default {','.join(default_domains())}); an "
            f"environment ({','.join(environments()) or 'none installed'}) plays its domain's problems as episodes")


def register(app: typer.Typer) -> None:
    """Add the `train` command to `app`."""

    @app.command("train", help=HELP)
    def train(
        overrides: Annotated[list[str] | None, typer.Argument(help="dotted overrides, e.g. pipeline.k=4")] = None,
        domains: Annotated[str | None, typer.Option(help=domains_help())] = None,
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
            "--print-config", help="print the fully resolved configuration as YAML, each value's layer beside it, "
            "and exit")] = False,
        preset: Annotated[str | None, typer.Option(
            help="tiny-cpu (default; small-cpu with --model on cpu) | small-cpu | paper | study")] = None,
        data: Annotated[list[str] | None, typer.Option(
            help="DOMAIN=FILE[,FILE...], optionally @WEIGHT: train on prepared parquet files (repeatable; one "
                 "source each, mixed within the domain by WEIGHT, default 1)")] = None,
        heldout: Annotated[list[str] | None, typer.Option(
            help="DOMAIN=FILE[,FILE...]: held-out files (default: split from the training data)")] = None,
        dry_run: Annotated[bool, typer.Option(
            "--dry-run", help="load data and tokenizer, print counts, prompt lengths and the memory plan, exit",
        )] = False,
        device_memory: Annotated[str | None, typer.Option(
            help="memory per GPU for the memory plan, e.g. 80GiB (default: the device's own)")] = None,
    ) -> None:
        from scalerl.env.contracts.config_loader import ConfigError
        from scalerl.trainer.config.resolve import RunFlags, resolve_config

        try:
            if device_memory is not None:
                from scalerl.trainer.memory.preflight import parse_memory_gib

                overrides = [*(overrides or []), f"engine.device_memory_gib={parse_memory_gib(device_memory)}"]
            flags = RunFlags(domains=domains, model=model, engine=engine, max_steps=max_steps, ray=ray,
                             ray_address=ray_address, trainer_ranks=trainer_ranks, data=data, heldout=heldout)
            cfg, layers = resolve_config(config, overrides or [], flags, resume=resume, preset=preset)
            if dry_run:
                from scalerl.trainer.run.dry_run import dry_run_report

                report = dry_run_report(cfg)
                typer.echo(report.text)
                if not report.fits:  # a preflight for scripts and CI: the same exit code as the run itself
                    typer.echo("error: the memory plan does not fit (exit 2)", err=True)
                    raise typer.Exit(2)
                return
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        if print_config:
            typer.echo(print_config_text(cfg, layers), nl=False)
            return
        folder = resume or out or Path("runs") / time.strftime("train-%Y%m%d-%H%M%S")
        from scalerl.trainer.run.loop import train as run_training

        if cfg.ray.enabled:  # the same loop inside a trainer actor
            from scalerl.trainer.run.loop import train_in_ray as run_training
        try:
            from scalerl.trainer.memory.preflight import preflight

            # here, not in setup: under Ray an error inside the actor would not exit with 2
            preflight(cfg.plan_inputs())
            summary = run_training(cfg, folder, resume=resume is not None)
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(render_summary(summary))


def print_config_text(cfg, layers) -> str:
    """The resolved configuration with the layer that set each value beside it (none: the class default)."""
    from scalerl.env.contracts.config_loader import annotated_yaml, layer_of_keys

    applied = [layer.name for layer in layers if layer.values]
    head = ("# class defaults, then (each later one wins): " + ", ".join(applied)) if applied else "# class defaults"
    return head + "\n" + annotated_yaml(cfg, layer_of_keys(layers))


def render_summary(summary: dict) -> str:
    from scalerl.trainer.run.log import STOPPED_BY

    stopped = f"; stopped by {STOPPED_BY[summary['stopped_by']]}" if summary.get("stopped_by") in STOPPED_BY else ""
    lines = [f"run folder: {summary['out']}  ({summary['steps']} steps, {summary['elapsed_s']:.0f} s{stopped})"]
    for domain, rates in summary.get("heldout_pass_rate", {}).items():
        lines.append(f"  held-out pass rate {domain}: {rates['first']:.3f} -> {rates['last']:.3f}")
    out = summary["out"]
    lines.append(f"  metrics: {out}/metrics.jsonl   curves: {out}/curves/   summary: {out}/summary.json")
    return "\n".join(lines)
