"""`scalerl ablate`: the ScaleRL leave-one-out study (variants x seeds, equal compute, fits, report).

Plans one run per variant and seed (`scalerl.trainer.ablate.study`), trains the unfinished ones with the real
trainer (`scalerl.trainer.ablate.runner`), fits and compares them (`scalerl.trainer.ablate.analysis`) and writes
`DIR/report.md`, `DIR/report.json` and `DIR/figures/`. Invoking it again on the same `--out` skips
finished runs, resumes interrupted ones from their checkpoint and rewrites the report. Bad variants,
overrides or a conflicting earlier study stop before any training with exit code 2.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

ALL = "baseline,loo-dapo,loo-savg,loo-plan,loo-batch,loo-fp32,loo-lp,loo-8op"

HELP = f"""Leave-one-out study of the ScaleRL recipe: every variant and seed gets the same compute budget
on the --compute axis (device-s: wall seconds x devices in use of the RL phase; samples, tokens or
flops: the same whatever the machine's load), sigmoid fits on the first half of it, scored on the
second, compared against the baseline's seed spread; report.md, report.json and figures in --out.

Built-in variants: {ALL}. Your own come from --variants-file (YAML: variants: NAME: overrides: [...]).
Overrides after the options apply to every run (a variant's own overrides win).

Examples:

  scalerl ablate --variants baseline,loo-dapo --seeds 2 --budget 150 --out runs/ablate

  scalerl ablate --variants baseline,loo-dapo --seeds 3 --compute samples --budget 20000 --out runs/ablate-s

  scalerl ablate --variants {ALL} --seeds 2 --budget 150 --out runs/ablate-all validation.every_steps=8

  scalerl ablate --variants baseline,my-k4 --variants-file my.yaml --budget 600 --out runs/k4 --ray-address auto

  scalerl ablate --variants baseline,loo-dapo --budget 150 --out runs/ablate --report-only   # refit, no training
"""


def register(app: typer.Typer) -> None:
    """Add the `ablate` command to `app`."""

    @app.command("ablate", help=HELP)
    def ablate(
        overrides: Annotated[list[str] | None, typer.Argument(help="dotted overrides for every run")] = None,
        variants: Annotated[str, typer.Option(help="comma-separated variant names (baseline is always run)")] = ALL,
        variants_file: Annotated[Path | None, typer.Option(help="YAML of user-defined variants")] = None,
        seeds: Annotated[int, typer.Option(min=1, help="runs per variant (pipeline.seed = 0..N-1)")] = 2,
        budget: Annotated[float, typer.Option(help="RL compute per run, in the unit of --compute")] = 150.0,
        compute: Annotated[str, typer.Option(
            help="the budget's and the fits' axis: device-s (wall s x devices, the paper's; follows the load) | "
                 "samples | tokens | flops (equal whatever the load)")] = "device-s",
        out: Annotated[Path | None, typer.Option(help="study folder (default runs/ablate-<time>)")] = None,
        config: Annotated[Path | None, typer.Option("--config", help="YAML of TrainConfig values")] = None,
        domains: Annotated[str | None, typer.Option(help="comma-separated: math,code (default both)")] = None,
        model: Annotated[str | None, typer.Option(help="HF folder or cached hub id; default: tiny model")] = None,
        engine: Annotated[str | None, typer.Option(help="torch | vllm")] = None,
        ray_address: Annotated[str | None, typer.Option(
            help="run the runs as Ray tasks on this cluster ('auto', an address, or 'local' to start one)")] = None,
        eval_samples: Annotated[int | None, typer.Option(
            min=1, help="held-out samples per domain per evaluation (default: the study preset's 2,500, "
            "a point's standard error <= 0.01)")] = None,
        burn_in: Annotated[float | None, typer.Option(help="drop points with 0 < compute < this from fits")] = None,
        fit_fraction: Annotated[float, typer.Option(help="fit on compute <= this share of the budget")] = 0.5,
        report_only: Annotated[bool, typer.Option("--report-only", help="fit and report finished runs only")] = False,
        plan_only: Annotated[bool, typer.Option(
            "--plan-only", help="run only the baseline's seeds and print the resolution the study would have "
            "(the full study in the same --out reuses those runs)")] = False,
    ) -> None:
        from scalerl.env.contracts.config_loader import ConfigError
        from scalerl.trainer.ablate.study import StudySpec, build_run_config, merge_previous, plan, write_manifest

        folder = out or Path("runs") / time.strftime("ablate-%Y%m%d-%H%M%S")
        try:
            spec = StudySpec(variants=[v.strip() for v in variants.split(",") if v.strip()],
                             variants_file=str(variants_file) if variants_file else None, seeds=seeds,
                             budget=budget, compute=compute.replace("-", "_"), out=str(folder),
                             config=str(config) if config else None,
                             domains=domains, model=model, engine=engine, overrides=overrides or [],
                             ray_address=ray_address, eval_samples=eval_samples, burn_in=burn_in,
                             fit_fraction=fit_fraction)
            if plan_only:
                from scalerl.trainer.ablate.variants import BASELINE

                spec = spec.model_copy(update={"variants": [BASELINE]})
            manifest = merge_previous(plan(spec), folder)
        except (ConfigError, ValueError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        folder.mkdir(parents=True, exist_ok=True)
        if not report_only:  # a report-only call leaves the manifest to the invocation that trains
            from scalerl.trainer.ablate.runner import execute

            write_manifest(manifest, folder)
            execute(manifest, folder)
        from scalerl.trainer.ablate.analysis import analyze
        from scalerl.trainer.ablate.report import write_report

        result = analyze(manifest, folder, build_run_config(spec, spec.overrides).domains)
        paths = write_report(manifest, result, folder)
        failed = [f"{r.variant}/seed{r.seed}" for r in manifest.runs if r.status == "failed"]
        typer.echo(f"study folder: {folder}  ({len(manifest.runs)} runs"
                   + (f", failed: {', '.join(failed)}" if failed else "") + ")")
        typer.echo(f"  report: {paths['report_md']}   json: {paths['report_json']}   figures: {folder / 'figures'}")
        from scalerl.trainer.ablate.report import resolution_line

        for d in result.report.domains:
            typer.echo(f"  {d.domain}: {resolution_line(d)}")
