"""`scalerl-env verify`: score a JSONL file of verify items, one verdict per line, in input order.

Every input line is validated before any work starts: a malformed line stops the command with exit
code 2 and a message naming the line number and the field; nothing is written in that case. Wrong
answers are results, not failures: the exit code is 0 whenever the file was scored. With `--out` the
verdict file is written atomically and a summary (counts by status, accuracy, throughput) is printed
to stdout; without it verdicts go to stdout and the summary to stderr. `--audit` adds, on stderr, the
items where the strict and default extractions or the fast path and sympy disagree
(`scalerl.verifiers.math.audit`).

I/O costs what the in-process batch API costs (benchmarks/bench_verify_cli.py): each line is parsed and
validated in one pydantic call, and the verdicts are serialized by pydantic-core (UTF-8 JSON, compact
separators) and written in one write; on a terminal the file is still scored in one batch (a bar shows
the time running). Not guaranteed: byte-identical output across pydantic versions
(the fields and values are).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import typer

EXAMPLE = "scalerl-env verify --file datasets/samples/math_items.jsonl --out runs/demo/verdicts.jsonl"


def read_items(source: str) -> list:
    """Verify items from a JSONL file (`-` = stdin); blank lines are skipped.

    Raises `ValueError` naming the 1-based line number and the field of the first malformed line."""
    if source == "-":
        return _parse_lines(sys.stdin)
    with open(source, encoding="utf-8") as stream:
        return _parse_lines(stream)


def _parse_lines(stream) -> list:
    from pydantic import ValidationError
    from scalerl.env.contracts.config_loader import validation_problems
    from scalerl.env.contracts.records import VerifyItem

    items = []
    for lineno, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            items.append(VerifyItem.model_validate_json(line))
        except ValidationError as exc:
            raise ValueError(f"line {lineno}: {validation_problems(exc, whole='(line)', first_only=True)[0]}") from None
    return items


def summarize(verdicts: list, wall_s: float) -> dict:
    counts = Counter(v.status.value for v in verdicts)
    scored = len(verdicts) - counts.get("error", 0)
    paths = Counter(v.details.get("path", "extraction") for v in verdicts)
    return {
        "items": len(verdicts), "counts": dict(counts), "correct": counts.get("correct", 0),
        "accuracy": counts.get("correct", 0) / scored if scored else 0.0, "errors": counts.get("error", 0),
        "wall_s": wall_s, "items_per_s": len(verdicts) / wall_s if wall_s > 0 else 0.0,
        "deduplicated": sum(bool(v.details.get("deduplicated")) for v in verdicts), "paths": dict(paths),
        "max_elapsed_s": max((v.elapsed_s for v in verdicts), default=0.0),
    }


def format_summary(s: dict, workers: int, startup_s: float, started_s: float | None = None) -> str:
    order = ("correct", "wrong", "no_answer", "unparsable", "timeout", "error")
    started = "" if started_s is None else f"; scoring started {started_s:.2f} s after launch"
    warm = f"warm-up {startup_s:.1f} s overlapped with scoring" if startup_s else "not warm yet: not needed"
    lines = [(f"verified {s['items']} items in {s['wall_s']:.2f} s = {s['items_per_s']:.1f} items/s "
              f"({workers} math workers, {warm}{started})")]
    for status in order:
        n = s["counts"].get(status, 0)
        share = 100.0 * n / s["items"] if s["items"] else 0.0
        lines.append(f"  {status:<11}{n:>7}  {share:5.1f}%")
    lines.append(f"accuracy {s['correct']}/{s['items'] - s['errors']} = {100 * s['accuracy']:.1f}% "
                 f"(verifier errors excluded: {s['errors']})")
    paths = ", ".join(f"{k} {v}" for k, v in sorted(s["paths"].items()))
    lines.append(f"decided by: {paths}; deduplicated {s['deduplicated']}; "
                 f"slowest item {s['max_elapsed_s']:.3f} s")
    return "\n".join(lines)


def score(pool, items: list, show_progress: bool) -> list:
    """The items' verdicts from one `verify_batch` call, on a terminal too: there a bar shows the time
    running, not a count (chunks would score repeats once per chunk and wait for each chunk's sympy
    work in turn: about 1 s more per 8,000 math items)."""
    if not show_progress:
        return pool.verify_batch(items)
    from concurrent.futures import ThreadPoolExecutor

    from rich.progress import Progress

    with ThreadPoolExecutor(max_workers=1) as executor, Progress(transient=True) as progress:
        task = progress.add_task(f"verifying {len(items)} items", total=None)
        verdicts = executor.submit(pool.verify_batch, items).result()
        progress.update(task, total=len(items), completed=len(items))
    return verdicts


def since_process_start() -> float | None:
    """Seconds since this process was started (Linux /proc; None elsewhere), interpreter start-up included."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


CONTEXT_FIELDS = ("prompt_id", "step", "policy_version", "sample_index", "truncated", "completion_tokens")


def verdict_line(item, verdict) -> dict:
    """One output line: the verdict, plus the item's ledger context when it carries a `prompt_id`,
    so that `scalerl-env ledger ingest` takes the file as it is. Built from the fields, not by
    `model_dump`: the typed fields need no conversion and the details are serialized as they are."""
    line = {"status": verdict.status.value, "reward": verdict.reward, "details": verdict.details,
            "elapsed_s": verdict.elapsed_s, "id": verdict.id}
    if item.prompt_id is not None:
        line["domain"] = item.domain
        for key in CONTEXT_FIELDS:
            value = getattr(item, key)
            if value is not None:
                line[key] = value
    return line


def verdict_lines(items: list, verdicts: list) -> bytes:
    """The verdict file: one JSON line per (item, verdict), UTF-8, serialized by pydantic-core."""
    from pydantic_core import to_json

    return b"".join([to_json(verdict_line(item, v)) + b"\n" for item, v in zip(items, verdicts)])


def report_audit(items: list, math_config) -> int:
    """Print the disputes of `scalerl.verifiers.math.audit` to stderr, one JSON object a line; returns their count."""
    from scalerl.verifiers.math.audit import audit

    disputes = audit(items, math_config)
    for dispute in disputes:
        typer.echo("audit: " + json.dumps(dispute.as_dict()), err=True)
    kinds = Counter(d.kind for d in disputes)
    typer.echo(f"audit: {len(disputes)} disputes ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items())) or 'none'})",
               err=True)
    return len(disputes)


def register(app: typer.Typer) -> None:
    """Add the `verify` command to `app`."""

    @app.command("verify", help=f"Score verify items (JSONL) of any domain (math, code, if, a plug-in's) into "
                                f"verdicts.\n\nExample: {EXAMPLE}")
    def verify(
        file: str = typer.Option(..., "--file", "-f", help="JSONL verify items, one per line; - for stdin"),
        out: Path | None = typer.Option(None, "--out", "-o", help="verdicts JSONL (default: stdout)"),
        workers: int | None = typer.Option(None, "--workers", "-w", min=1, help="math worker processes"),
        config: Path | None = typer.Option(None, "--config", help="VerifierConfig YAML"),
        overrides: list[str] | None = typer.Argument(
            None, help="dotted overrides, e.g. math.timeout_s=2 if.mode=loose"),
        audit: bool = typer.Option(False, "--audit", help="also report items where strict and default "
                                   "extraction, or the fast path and sympy, disagree (stderr, JSON lines)"),
    ) -> None:
        from scalerl.env.contracts.config_loader import ConfigError, atomic_write_text, load_config
        from scalerl.verifiers.batch import VerifierPool
        from scalerl.verifiers.verifier_config import VerifierConfig

        extra = [f"math.workers={workers}"] if workers else []
        try:
            cfg = load_config(VerifierConfig, config, [*(overrides or []), *extra])
        except ConfigError as exc:
            typer.echo(f"error: config: {exc}", err=True)
            raise typer.Exit(2) from None
        # Workers start (and warm, ~2.5 s) while the input is read and while extraction and the exact
        # fast path score what they can; only items that need sympy wait for a warm worker.
        with VerifierPool(cfg) as pool:
            try:
                items = read_items(file)
            except (ValueError, OSError) as exc:
                typer.echo(f"error: {file}: {exc}", err=True)
                raise typer.Exit(2) from None
            started_s = since_process_start()
            t0 = time.perf_counter()
            verdicts = score(pool, items, show_progress=sys.stderr.isatty())
            wall_s = time.perf_counter() - t0
            startup_s = max(pool.info()["math"]["startup_s"] or [0.0])
        data = verdict_lines(items, verdicts)
        if audit:
            report_audit(items, cfg.math)
        summary = format_summary(summarize(verdicts, wall_s), cfg.math.workers, startup_s, started_s)
        if out is not None:
            atomic_write_text(out, data)
            typer.echo(summary)
            typer.echo(f"verdicts: {out}")
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
            typer.echo(summary, err=True)
