"""`scalerl profile`: sample every prompt N times with the trainer's engine and verifiers,
attempts into a ledger (`scalerl.trainer.run.profile`).

A `scalerl` command, not a `scalerl-env` one: it needs the trainer's engines and prompt template, and
`scalerl_env` never imports the trainer. Filtering a file by the profile needs only the ledger:
`scalerl-env data filter`. The configuration is resolved as for `scalerl train` (preset, YAML,
`--data`, `--model`, dotted overrides), so the profile sees the prompts and sampling a run would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

HELP = """Profile a dataset's difficulty before training: N samples per prompt into a ledger.

Examples:

  scalerl profile --data math=gsm8k.parquet --samples 8 --ledger runs/profile.duckdb

  scalerl profile --data math=gsm8k.parquet --model smollm2-135m-instruct --preset small-cpu \\
      --samples 16 --ledger runs/profile.duckdb

  scalerl-env data filter gsm8k.parquet --ledger runs/profile.duckdb --pass-rate 0.01:0.99 --out band.parquet

  scalerl train --data math=band.parquet curriculum.prior_ledger=runs/profile.duckdb \\
      curriculum.priority.mode=learnability
"""


def register(app: typer.Typer) -> None:
    """Add the `profile` command to `app`."""
    app.command("profile", help=HELP)(profile_cmd)


def profile_cmd(
    ledger: Annotated[Path, typer.Option("--ledger", help="the profile ledger (created or continued)")],
    samples: Annotated[int, typer.Option("--samples", min=1, help="attempts per prompt (POLARIS: 8)")] = 8,
    overrides: Annotated[list[str] | None, typer.Argument(help="dotted overrides, as for scalerl train")] = None,
    data: Annotated[list[str] | None, typer.Option(help="DOMAIN=FILE[,FILE...] (repeatable)")] = None,
    domains: Annotated[str | None, typer.Option(help="comma-separated: math,code")] = None,
    model: Annotated[str | None, typer.Option(help="HF folder, cached hub id or alias; default: tiny model")] = None,
    engine: Annotated[str | None, typer.Option(help="torch | vllm")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="YAML file of TrainConfig values")] = None,
    preset: Annotated[str | None, typer.Option(help="tiny-cpu (default) | small-cpu | paper")] = None,
) -> None:
    from scalerl.env.contracts.config_loader import ConfigError
    from scalerl.trainer.config.resolve import RunFlags, resolve_config
    from scalerl.trainer.run.profile import profile

    try:
        flags = RunFlags(domains=domains, model=model, engine=engine, data=data)
        cfg, _ = resolve_config(config, overrides or [], flags, preset=preset)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress("profiling", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()) as bar:
        task = bar.add_task("prompts", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        summary = profile(cfg, ledger, samples, progress=progress)
    typer.echo(f"{summary.prompts} prompts ({summary.skipped_long} too long, left out); sampled "
               f"{summary.sampled_prompts} now, {summary.attempts_recorded} attempts recorded in "
               f"{summary.elapsed_s:.0f} s -> {ledger}")
