"""`scalerl-env data`: prepare public datasets or generated problems as parquet, and self-check them.

    scalerl-env data sources
    scalerl-env data prepare gsm8k --data-files test.jsonl --holdout 100 --out runs/data/gsm8k.parquet
    scalerl-env data prepare deepcoder --config taco --limit 1000 --out runs/data/taco.parquet   (hub)
    scalerl-env data prepare verl --data-files verl_gsm8k.parquet --out runs/data/gsm8k.parquet
    scalerl-env data generate math --count 5000 --seed 0 --level 0 --out runs/data/gen_math.parquet
    scalerl-env data check runs/data/gsm8k.parquet --drop-failing
    scalerl-env data filter runs/data/gsm8k.parquet --ledger runs/profile.duckdb --pass-rate 0.01:0.99 --out f.parquet

Output files use the verl parquet schema (scalerl_env/sources/verl.py). Bad rows are reported with
source, file and row number and never stop a run; `check` exits 1 when a gold answer fails (unless
`--drop-failing` removed the failing rows).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from scalerl.env.commands.data_filter import filter_cmd

MAX_SHOWN = 20


def register(app: typer.Typer) -> None:
    """Add the `data` command group to `app`."""
    data = typer.Typer(help="Prepare and check problem sets.\n\nExample: scalerl-env data sources",
                       no_args_is_help=True)
    data.command("sources")(sources)
    data.command("prepare")(prepare_cmd)
    data.command("generate")(generate_cmd)
    data.command("check")(check_cmd)
    data.command("filter")(filter_cmd)
    app.add_typer(data, name="data")


def sources() -> None:
    """List the supported sources (manifests in datasets/manifests/).

    Example: scalerl-env data sources
    """
    from scalerl.env.sources.manifest import list_sources, load_manifest

    for name in list_sources():
        m = load_manifest(name)
        configs = ",".join(c for c in m.hub.configs if c) or "-"
        typer.echo(f"{name:15} {m.domain:5} {m.hub.path} configs={configs} splits={','.join(m.hub.splits)}"
                   f"  {m.description}")
    typer.echo("verl            any   a verl-schema parquet file (--data-files)")


def prepare_cmd(
    source: str = typer.Argument(..., help="source name (see `data sources`), 'verl', or a manifest .yaml"),
    out: Path = typer.Option(..., "--out", help="output parquet (verl schema)"),
    data_files: list[Path] | None = typer.Option(None, "--data-files", help="local files; else the hub"),
    fixture: bool = typer.Option(False, "--fixture", help="use the tiny fixture shipped in datasets/fixtures"),
    config: list[str] | None = typer.Option(None, "--config", help="hub config(s); default: all in the manifest"),
    split: str | None = typer.Option(None, "--split", help="hub split; default: the manifest's first"),
    limit: int | None = typer.Option(None, "--limit", min=1, help="read at most N rows"),
    holdout: int = typer.Option(0, "--holdout", min=0, help="hold out N prompts for validation (paper: 1000)"),
    holdout_seed: int = typer.Option(0, "--holdout-seed"),
    holdout_out: Path | None = typer.Option(None, "--holdout-out", help="default: OUT with .heldout.parquet"),
    instruction: str | None = typer.Option(None, "--instruction", help="replace the source's instruction"),
    errors_out: Path | None = typer.Option(None, "--errors", help="write every skipped row as JSONL"),
) -> None:
    """Turn a public dataset into problem records (parquet, verl schema), with an optional held-out split.

    Example: scalerl-env data prepare gsm8k --data-files gsm8k/test.jsonl --holdout 100 --out gsm8k.parquet
    """
    from scalerl.env.sources import prepare as prep
    from scalerl.env.sources.loading import DataLoadError
    from scalerl.env.sources.manifest import ManifestError, fixture_path, load_manifest

    try:
        if source == "verl":
            result = prep.prepare_verl(list(data_files or []), limit=limit, holdout=holdout,
                                       holdout_seed=holdout_seed)
        else:
            manifest = load_manifest(source)
            if instruction is not None:
                manifest = manifest.model_copy(update={"instruction": instruction})
            files = list(data_files or []) or None
            if fixture:
                files = {(None if c == "default" else c): [fixture_path(manifest, c)]
                         for c in (config or list(manifest.fixtures))}
            result = prep.prepare(manifest, files=files, configs=config or None, split=split,
                                  limit=limit, holdout=holdout, holdout_seed=holdout_seed)
    except (ManifestError, DataLoadError, LookupError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    _write_outputs(result, out, holdout_out, errors_out)


def _write_outputs(result, out: Path, holdout_out: Path | None, errors_out: Path | None) -> None:
    from scalerl.env.sources.verl import write_records

    write_records(result.records, out)
    typer.echo(f"read {result.rows_read} rows: {len(result.records)} records -> {out}, "
               f"{len(result.errors)} skipped, {result.duplicates} duplicate prompts dropped")
    if result.heldout:
        held_path = holdout_out or out.with_name(out.name.removesuffix(".parquet") + ".heldout.parquet")
        write_records(result.heldout, held_path)
        typer.echo(f"held out {len(result.heldout)} records -> {held_path}")
    for error in result.errors[:MAX_SHOWN]:
        typer.echo(f"skipped: {error}", err=True)
    if len(result.errors) > MAX_SHOWN:
        typer.echo(f"... and {len(result.errors) - MAX_SHOWN} more (--errors FILE lists all)", err=True)
    if errors_out:
        errors_out.parent.mkdir(parents=True, exist_ok=True)
        errors_out.write_text("".join(
            json.dumps({"source": e.source, "origin": e.origin, "row": e.row, "message": e.message}) + "\n"
            for e in result.errors))


def generate_cmd(
    domain: str = typer.Argument(..., help="an installed domain with a generator (its spec's generator_families)"),
    out: Path = typer.Option(..., "--out", help="output parquet (verl schema)"),
    count: int = typer.Option(1000, "--count", min=1),
    seed: int = typer.Option(0, "--seed", min=0),
    level: int = typer.Option(0, "--level", min=0, help="0 = learnable by a tiny CPU model"),
    family: list[str] = typer.Option([], "--family", help="only this family of the level (repeatable)"),
) -> None:
    """Write procedurally generated problems (no download) as parquet.

    Example: scalerl-env data generate code --count 2000 --seed 1 --level 0 --out gen_code.parquet;
    tasks stated in words: --level 4 --family function_words (math: arithmetic_words, word_problem)
    """
    from scalerl.env.sources.generators import generate
    from scalerl.env.sources.verl import write_records

    try:
        records = generate(domain, seed=seed, count=count, level=level, families=family or None)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    n = write_records(records, out)
    typer.echo(f"generated {n} {domain} problems (seed {seed}, level {level}) -> {out}")


def check_cmd(
    file: Path = typer.Argument(..., help="a parquet file written by `data prepare` or `data generate`"),
    drop_failing: bool = typer.Option(False, "--drop-failing", help="remove rows whose gold is not correct"),
    out: Path | None = typer.Option(None, "--out", help="with --drop-failing: write here (default: in place)"),
    report: Path | None = typer.Option(None, "--report", help="write the failing rows as JSONL"),
    time_s: float | None = typer.Option(None, "--time-s", min=0.1, max=60, help="CPU-time limit per code test"),
) -> None:
    """Score every gold answer / reference solution with the verifiers; report rows not `correct`.

    Example: scalerl-env data check runs/data/gsm8k.parquet --drop-failing
    """
    from scalerl.env.contracts.records import Limits
    from scalerl.env.sources.prepare import check_records
    from scalerl.env.sources.prepare import drop_failing as drop
    from scalerl.env.sources.verl import read_records, write_records

    if not file.is_file():
        typer.echo(f"error: no such file {file}", err=True)
        raise typer.Exit(2)
    records, errors = read_records(file)
    for error in errors[:MAX_SHOWN]:
        typer.echo(f"unreadable: {error}", err=True)
    from scalerl.verifiers import close_default_pools

    try:
        result = check_records(records, limits=Limits(time_s=time_s) if time_s else None)
    finally:
        close_default_pools()
    typer.echo(f"{file}: {len(records)} records, {result.checked} with a gold answer, "
               f"{result.correct} correct, {len(result.failures)} failing, {result.unchecked} unchecked")
    for f in result.failures[:MAX_SHOWN]:
        typer.echo(f"failing: row {f.index + 1} {f.source} {f.prompt_id} {f.status} {f.detail}", err=True)
    if report:
        report.write_text("".join(json.dumps(vars(f)) + "\n" for f in result.failures))
    if drop_failing:
        kept = drop(records, result)
        write_records(kept, out or file)
        typer.echo(f"kept {len(kept)} records -> {out or file}")
    elif result.failures or errors:
        raise typer.Exit(1)
