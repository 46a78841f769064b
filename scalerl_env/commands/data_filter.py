"""`scalerl-env data filter`: keep the prompts of a prepared file whose profiled pass rate lies in a band.

    scalerl profile --data math=gsm8k.parquet --samples 8 --ledger runs/profile.duckdb
    scalerl-env data filter gsm8k.parquet --ledger runs/profile.duckdb --pass-rate 0.01:0.99 --out gsm8k_band.parquet

The pass rate of a prompt is `correct / scored` over every attempt the ledger holds for it (the
`pass_rates` view). A row is kept when LOW <= pass rate <= HIGH; rows whose prompt has no scored
attempt in the ledger are dropped and counted (`--keep-unprofiled` keeps them). The output is the
input's own parquet table, filtered row by row: same columns, same order, same schema.

This command lives in `scalerl_env` (it needs only the ledger); profiling needs the trainer's
engines, so it is `scalerl profile`. A command of the `data` group (`scalerl_env/commands/data.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer


@dataclass
class FilterSummary:
    rows: int
    kept: int
    unprofiled: int
    below: int
    above: int


def parse_band(text: str) -> tuple[float, float]:
    """'LOW:HIGH' -> (low, high), both in [0, 1] and low <= high."""
    low, sep, high = text.partition(":")
    try:
        lo, hi = float(low), float(high)
    except ValueError:
        raise typer.BadParameter(f"{text!r}: expected LOW:HIGH, e.g. 0.01:0.99", param_hint="--pass-rate") from None
    if not sep or not 0.0 <= lo <= hi <= 1.0:
        raise typer.BadParameter(f"{text!r}: need 0 <= LOW <= HIGH <= 1", param_hint="--pass-rate")
    return lo, hi


def filter_file(path: Path, ledger_path: Path, low: float, high: float, out: Path, *,
                keep_unprofiled: bool = False) -> FilterSummary:
    """Write the rows of `path` whose prompt's pass rate in `ledger_path` lies in [low, high] to `out`."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from scalerl.curriculum.ledger.store import Ledger
    from scalerl.env.sources.verl import load_record_file

    records = load_record_file(path)
    with Ledger(ledger_path, read_only=True) as ledger:
        rates = ledger.pass_rates([r.prompt_id for r in records])
    keep, counts = [], {"unprofiled": 0, "below": 0, "above": 0}
    for r in records:
        rate = rates[r.prompt_id].pass_rate if r.prompt_id in rates else None
        verdict = ("unprofiled" if rate is None else "below" if rate < low else "above" if rate > high else "kept")
        keep.append(verdict == "kept" or (verdict == "unprofiled" and keep_unprofiled))
        if verdict != "kept":
            counts[verdict] += 1
    table = pq.read_table(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.filter(pa.array(keep, pa.bool_())), out)
    return FilterSummary(rows=len(records), kept=sum(keep), **counts)


def filter_cmd(
    file: Path = typer.Argument(..., help="a prepared parquet file (verl schema)"),
    ledger: Path = typer.Option(..., "--ledger", help="a ledger holding the prompts' attempts (a profile)"),
    pass_rate: str = typer.Option(..., "--pass-rate", help="LOW:HIGH, both inclusive, e.g. 0.01:0.99"),
    out: Path = typer.Option(..., "--out", help="output parquet: the kept rows of FILE"),
    keep_unprofiled: bool = typer.Option(False, "--keep-unprofiled", help="keep rows the ledger has no attempt for"),
) -> None:
    """Keep the prompts whose profiled pass rate lies in a band (POLARIS / Skywork-OR1 filtering).

    Example: scalerl-env data filter gsm8k.parquet --ledger profile.duckdb --pass-rate 0.01:0.99 --out band.parquet
    """
    from scalerl.curriculum.ledger.models import LedgerError
    from scalerl.env.sources.verl import RecordFileError

    low, high = parse_band(pass_rate)
    try:
        s = filter_file(file, ledger, low, high, out, keep_unprofiled=keep_unprofiled)
    except (RecordFileError, LedgerError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"kept {s.kept} of {s.rows} rows with pass rate in [{low:g}, {high:g}] -> {out}  "
               f"(below {s.below}, above {s.above}, unprofiled {s.unprofiled}"
               f"{' kept' if keep_unprofiled else ' dropped'})")

