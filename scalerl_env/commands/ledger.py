"""`scalerl-env ledger query|snapshot|ingest|stats|rescore`: read and feed the DuckDB pass-rate ledger.

`query` and `stats` go to a running owner when `--url` is given (the reward server's `POST
/v1/ledger/query`, with the bearer token of `--token`, `--token-file` or `$SCALERL_REWARD_TOKEN`); with
`--run DIR` (a `scalerl train` run folder) to the ledger's latest Parquet snapshot while the trainer holds
the file, and to the file once it is free; with `--ledger FILE` they open the file read-only (which fails,
with a hint, while an owner holds it). Only single SELECT statements are accepted, with a time limit.
`stats --verifier-version V` reads the pass rates of one verifier version (`version_pass_rates`);
`rescore` scores the stored completions again with the installed verifiers (`scalerl.env.ledger_rescore`).
Exit codes: 0 done, 2 bad input or refused (the message says why), 1 unexpected failure.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path

import typer

LEDGER_OPT = typer.Option(None, "--ledger", help="ledger file (DuckDB)")
URL_OPT = typer.Option(None, "--url", help="a running owner, e.g. http://127.0.0.1:8000")
RUN_OPT = typer.Option(None, "--run", help="a `scalerl train` run folder, training or finished")
TIMEOUT_OPT = typer.Option(10.0, "--timeout-s", min=0.1, help="query time limit, seconds")
TOKEN_OPT = typer.Option(None, "--token", help="with --url: a `read` bearer token (default: $SCALERL_REWARD_TOKEN)")
TOKEN_FILE_OPT = typer.Option(None, "--token-file", help="with --url: a file holding the token (instead of --token)")

STATS_SQL = {
    "totals": """SELECT (SELECT count(*) FROM problems) AS problems, count(*) AS prompts_seen,
                        coalesce(sum(attempts), 0) AS attempts, count(*) FILTER (WHERE retired) AS retired,
                        (SELECT max(last_step) FROM pass_rates) AS last_step FROM pass_rates""",
    "domains": """SELECT domain, count(*) AS prompts, sum(attempts) AS attempts, sum(correct) AS correct,
                         round(sum(correct) / nullif(sum(scored), 0), 4) AS pass_rate,
                         count(*) FILTER (WHERE retired) AS retired FROM pass_rates GROUP BY domain ORDER BY domain""",
    "histogram": """SELECT domain, least(floor(pass_rate * 10), 9)::INT AS bucket, count(*) AS prompts
                    FROM pass_rates WHERE pass_rate IS NOT NULL GROUP BY ALL ORDER BY ALL""",
}


# One verifier version's pass rates per domain and settings digest (original and re-scored verdicts).
VERSION_SQL = """SELECT domain, settings_digest, count(*) AS prompts, sum(verdicts) AS verdicts,
                        sum(correct) AS correct, round(sum(correct) / nullif(sum(scored), 0), 4) AS pass_rate
                 FROM version_pass_rates WHERE verifier_version = '{version}' GROUP BY ALL ORDER BY ALL"""


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


def _fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def bearer_token(token: str | None, token_file: Path | None) -> str | None:
    """`--token`, else the one token in `--token-file`, else $SCALERL_REWARD_TOKEN, else None."""
    from scalerl.env.client import client_token

    if token is not None and token_file is not None:
        _fail("give --token or --token-file, not both")
    if token_file is not None:
        from scalerl.env.server.auth import TokenFileError, read_token_file

        try:
            return read_token_file(token_file)
        except (OSError, TokenFileError) as exc:
            _fail(f"--token-file: {exc}")
    return client_token(token)


def _refusal(status: int, detail: object) -> str:
    """The owner's refusal, and for 401/403 what to send instead."""
    from scalerl.env.client import TOKEN_ENV

    hint = {401: f"; give a `read` token: --token TOKEN, --token-file FILE or ${TOKEN_ENV}",
            403: "; this token's scope does not allow it (queries need `read` or `score`)"}.get(status, "")
    return f"owner answered {status}: {detail}{hint}"


def run_query(sql: str, *, ledger: Path | None, url: str | None, timeout_s: float, token: str | None = None,
              run: Path | None = None):
    """QueryResult from the owner at `url` (sending `token` as the bearer), from what the run folder `run`
    offers (`query_run`), or from the file opened read-only."""
    from scalerl.curriculum.ledger.models import LedgerError, QueryResult

    if sum(x is not None for x in (ledger, url, run)) != 1:
        _fail("give exactly one of --ledger FILE, --url URL or --run DIR")
    if run is not None:
        return query_run(sql, run, timeout_s=timeout_s)
    if url is not None:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            resp = httpx.post(url.rstrip("/") + "/v1/ledger/query", json={"sql": sql, "timeout_s": timeout_s},
                              timeout=timeout_s + 10.0, headers=headers)
        except httpx.HTTPError as exc:
            _fail(f"cannot reach the ledger owner at {url}: {exc}")
        if resp.status_code != 200:
            try:
                detail = resp.json().get("detail", resp.text)
            except ValueError:
                detail = resp.text
            _fail(_refusal(resp.status_code, detail))
        body = resp.json()
        return QueryResult(columns=body["columns"], rows=body["rows"], truncated=body.get("truncated", False))
    from scalerl.curriculum.ledger.store import Ledger

    try:
        with Ledger(ledger, read_only=True) as led:
            return led.query(sql, timeout_s=timeout_s)
    except LedgerError as exc:
        _fail(str(exc))


def query_run(sql: str, run: Path, *, timeout_s: float):
    """A run folder's ledger: the file itself when no trainer holds it, else the trainer's latest snapshot."""
    from scalerl.curriculum.ledger.models import LedgerError
    from scalerl.curriculum.ledger.snapshot_read import READERS_NOTE, latest_snapshot, query_snapshot, read_note
    from scalerl.curriculum.ledger.store import Ledger

    note = read_note(run)
    if note is None:
        _fail(f"{run} holds no {READERS_NOTE}: not a `scalerl train` run folder; give --ledger FILE instead")
    try:
        if not note.held():
            try:
                led = Ledger(run / note.ledger, read_only=True)
            except LedgerError:  # held after all (a resumed run, or the note not yet rewritten): the snapshot
                pass
            else:
                with led:
                    return led.query(sql, timeout_s=timeout_s)
        snap = latest_snapshot(run / note.snapshots)
        if snap is None:
            _fail(f"{run}: the trainer holds {note.ledger} and has written no snapshot of it yet; query again")
        return query_snapshot(snap, sql, timeout_s=timeout_s)
    except LedgerError as exc:
        _fail(str(exc))


def _render(result, fmt: Format) -> str:
    if fmt is Format.json:
        return json.dumps({"columns": result.columns, "rows": result.rows}, default=str) + "\n"
    if fmt is Format.csv:
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(result.columns)
        writer.writerows(result.rows)
        return buf.getvalue()
    from rich.console import Console
    from rich.table import Table

    table = Table(*result.columns)
    for row in result.rows:
        table.add_row(*("NULL" if v is None else str(v) for v in row))
    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    console.print(table)
    return console.file.getvalue()


def query(
    sql: str = typer.Argument(..., help="one SELECT statement"),
    ledger: Path | None = LEDGER_OPT, url: str | None = URL_OPT, run: Path | None = RUN_OPT,
    fmt: Format = typer.Option(Format.table, "--format", help="table | csv | json"),
    timeout_s: float = TIMEOUT_OPT, token: str | None = TOKEN_OPT, token_file: Path | None = TOKEN_FILE_OPT,
) -> None:
    """Run one read-only SQL statement against the ledger.

    Example: scalerl-env ledger query "SELECT * FROM pass_rates ORDER BY pass_rate LIMIT 10" --run runs/demo
    """
    result = run_query(sql, ledger=ledger, url=url, timeout_s=timeout_s, token=bearer_token(token, token_file),
                       run=run)
    sys.stdout.write(_render(result, fmt))
    if result.truncated:
        typer.echo(f"(truncated to {len(result.rows)} rows)", err=True)


def snapshot(
    ledger: Path = typer.Option(..., "--ledger", help="ledger file (DuckDB)"),
    out: Path = typer.Option(..., "--out", help="directory that receives snapshot-*/ and latest"),
    keep: int = typer.Option(3, "--keep", min=1, help="snapshots kept"),
) -> None:
    """Write an atomic Parquet snapshot (readable without the DuckDB lock).

    Example: scalerl-env ledger snapshot --ledger runs/ledger.duckdb --out runs/ledger_snapshots
    """
    from scalerl.curriculum.ledger.models import LedgerError
    from scalerl.curriculum.ledger.store import Ledger

    try:
        with Ledger(ledger, read_only=True) as led:
            path = led.snapshot(out, keep=keep)
    except LedgerError as exc:
        _fail(str(exc))
    typer.echo(f"snapshot: {path}")


def ingest(
    ledger: Path = typer.Option(..., "--ledger", help="ledger file (created if missing)"),
    file: Path = typer.Option(..., "--file", help="verdict lines (JSONL) carrying prompt_id"),
    allow_unknown: bool = typer.Option(False, "--allow-unknown", help="accept prompt_ids not in problems"),
) -> None:
    """Bulk-import verdict lines; all or nothing, and a file already ingested is refused.

    Example: scalerl-env ledger ingest --ledger runs/ledger.duckdb --file runs/demo/verdicts.jsonl
    """
    with _without_pandas():
        from concurrent.futures import ThreadPoolExecutor

        import pyarrow as pa
        from scalerl.curriculum.ledger.ingest_read import read_verdict_file

        # The process's Arrow allocations are a few large buffers for one JSON read: the system allocator
        # parsed 200,000 lines in 0.16-0.19 s, pyarrow's default mimalloc pool in 0.28-0.41 s (first read
        # in a fresh process, 2-core VM).
        pa.set_memory_pool(pa.system_memory_pool())
        with ThreadPoolExecutor(1) as pool:  # the file is read while DuckDB, pydantic and the ledger load
            reading = pool.submit(read_verdict_file, file)
            from scalerl.curriculum.ledger.ingest import ingest_file
            from scalerl.curriculum.ledger.models import LedgerError
            from scalerl.curriculum.ledger.store import Ledger

            try:
                with Ledger(ledger) as led:
                    rows = ingest_file(led, file, allow_unknown=allow_unknown, reading=reading)
            except LedgerError as exc:
                _fail(str(exc))
    typer.echo(f"ingested {rows} rows from {file} into {ledger}")


class _NoPandas:
    """A meta-path finder that refuses to import pandas (see `_without_pandas`)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] == "pandas":
            raise ModuleNotFoundError("pandas is not needed by `scalerl-env ledger ingest`", name=name)


@contextmanager
def _without_pandas() -> Iterator[None]:
    """In a fresh `ingest` process, keep pyarrow from importing pandas (a fifth of a second, a sixth of a
    200,000-line import): pyarrow imports it on the first conversion of Python values only to ask whether
    they are pandas objects, and nothing here has any. pyarrow retries the import when pandas is really
    asked for (`to_pandas`), and a process that loaded pyarrow before (a test run) is left alone."""
    finder = _NoPandas() if "pyarrow" not in sys.modules and "pandas" not in sys.modules else None
    if finder is not None:
        sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        if finder is not None:
            sys.meta_path.remove(finder)


def stats(
    ledger: Path | None = LEDGER_OPT, url: str | None = URL_OPT, run: Path | None = RUN_OPT,
    timeout_s: float = TIMEOUT_OPT, token: str | None = TOKEN_OPT, token_file: Path | None = TOKEN_FILE_OPT,
    verifier_version: str | None = typer.Option(
        None, "--verifier-version", help="only this verifier version's pass rates (original and re-scored "
        "verdicts), per domain and settings digest"),
) -> None:
    """One-screen summary: prompts, attempts, pass-rate histogram per domain, retired count.

    Example: scalerl-env ledger stats --ledger runs/ledger.duckdb
    """
    bearer = bearer_token(token, token_file)
    if verifier_version is not None:
        sql = VERSION_SQL.format(version=verifier_version.replace("'", "''"))
        result = run_query(sql, ledger=ledger, url=url, timeout_s=timeout_s, token=bearer, run=run)
        if not result.rows:
            _fail(f"no verdicts of verifier version {verifier_version!r} (see SELECT DISTINCT verifier_version "
                  "FROM verdicts)")
        typer.echo(f"verifier version {verifier_version}\n" + _render(result, Format.table).rstrip())
        return
    res = {k: run_query(sql, ledger=ledger, url=url, timeout_s=timeout_s, token=bearer, run=run)
           for k, sql in STATS_SQL.items()}
    totals = dict(zip(res["totals"].columns, res["totals"].rows[0]))
    lines = [" · ".join(f"{k} {v}" for k, v in totals.items()), ""]
    lines.append(_render(res["domains"], Format.table).rstrip())
    hist: dict[str, dict[int, int]] = {}
    for domain, bucket, n in res["histogram"].rows:
        hist.setdefault(domain, {})[int(bucket)] = int(n)
    for domain, buckets in sorted(hist.items()):
        lines.append(f"\npass-rate histogram, {domain} (prompts per 0.1 bucket)")
        top = max(buckets.values())
        for b in range(10):
            n = buckets.get(b, 0)
            label = f"[{b / 10:.1f}, {(b + 1) / 10:.1f}{']' if b == 9 else ')'}"
            lines.append(f"  {label:<11} {'█' * round(30 * n / top) if n else ''} {n}")
    typer.echo("\n".join(lines))


def rescore(
    ledger: Path = typer.Option(..., "--ledger", help="ledger file (DuckDB); held by this command while it runs"),
    domain: str | None = typer.Option(None, "--domain", help="only this domain's attempts"),
    limit: int | None = typer.Option(None, "--limit", min=1, help="only the first N attempts (oldest first)"),
    config: Path | None = typer.Option(None, "--config", help="VerifierConfig YAML (the installed defaults if none)"),
    overrides: list[str] | None = typer.Argument(None, help="dotted verifier overrides, e.g. if.mode=loose"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
) -> None:
    """Score the stored completions again with the installed verifiers; report the flips per domain and rule.

    The new verdicts are kept beside the originals (table `rescores`), under the installed verifier
    version and settings digest; the original verdicts are never changed.

    Example: scalerl-env ledger rescore --ledger runs/demo/ledger.duckdb
    """
    from scalerl.curriculum.ledger.models import LedgerError
    from scalerl.curriculum.ledger.retirement import RetirementConfig
    from scalerl.curriculum.ledger.store import Ledger
    from scalerl.env.contracts.config_loader import ConfigError, load_config
    from scalerl.env.contracts.domains import UnknownDomainError
    from scalerl.env.contracts.domains import domain as domain_spec
    from scalerl.env.ledger_rescore import rescore as run_rescore
    from scalerl.verifiers.batch import VerifierPool
    from scalerl.verifiers.verifier_config import VerifierConfig

    try:
        cfg = load_config(VerifierConfig, config, list(overrides or []))
        if domain is not None:
            domain_spec(domain)
    except (ConfigError, UnknownDomainError) as exc:
        _fail(str(exc))
    if not ledger.exists():
        _fail(f"ledger {ledger} does not exist")
    try:  # retirement off: re-scoring must not change what the run trains on
        with Ledger(ledger, retirement=RetirementConfig(enabled=False)) as led, VerifierPool(cfg) as pool:
            report = run_rescore(led, pool, domain=domain, limit=limit)
    except LedgerError as exc:
        _fail(str(exc))
    typer.echo(report.model_dump_json(indent=2) if as_json else _rescore_text(report))


def _rescore_text(report) -> str:
    lines = []
    for name, d in sorted(report.domains.items()):
        lines.append(f"{name}: {d.rescored} rescored as {d.verifier_version or '-'} "
                     f"(settings {d.settings_digest or '-'}) · {d.unchanged} unchanged · correct → wrong "
                     f"{d.correct_to_wrong} · wrong → correct "
                     f"{d.wrong_to_correct} · not rescorable: {d.no_completion} without a completion, "
                     f"{d.no_reference} without a problem")
        for rule, f in sorted(d.by_rule.items()):
            lines.append(f"  rule {rule}: correct → wrong {f.correct_to_wrong} · wrong → correct {f.wrong_to_correct}")
    return "\n".join(lines) or f"{report.ledger}: no attempts to rescore"


def register(app: typer.Typer) -> None:
    """Add the `ledger` command group to `app`."""
    sub = typer.Typer(
        name="ledger", no_args_is_help=True,
        help="The DuckDB pass-rate ledger.\n\nExample: scalerl-env ledger stats --ledger runs/ledger.duckdb",
    )
    sub.command("query")(query)
    sub.command("snapshot")(snapshot)
    sub.command("ingest")(ingest)
    sub.command("stats")(stats)
    sub.command("rescore")(rescore)
    app.add_typer(sub, name="ledger")
