"""`scalerl dash RUN_DIR`: the read-only dashboard of one run folder (live or finished), no reward server.

Serves the pages and typed JSON routes of `scalerl.env.dashboard` over RUN_DIR (docs/dashboard.md).
Its ledger is opened read-only; while a run is training (the trainer holds the file), the latest
checkpoint's ledger copy is read instead; metrics, curves and rollouts are read live. `--compare DIR`
adds run folders to the Compare page. Binds loopback by default. Not guaranteed: a run can be resumed
into the folder while the dashboard has its finished ledger open (stop the dashboard first).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

HELP = """Serve the read-only dashboard of a run folder (Overview, Ledger, Rollouts, Curriculum, Compare).

Example: scalerl dash runs/demo --port 8080 --compare runs/ablation-b
"""


def register(app: typer.Typer) -> None:
    """Add the `dash` command to `app`."""
    app.command("dash", help=HELP)(dash_cmd)


def build_dash_app(run: Path, compare: list[Path] | None = None) -> Any:
    """The FastAPI app of the dashboard over `run` (no reward routes); closes the ledger on shutdown."""
    from fastapi import FastAPI
    from scalerl.env.dashboard.routes import DashSource, build_router

    source = DashSource(run=run, compare=list(compare or []))
    app = FastAPI(title="scalerl dashboard", description="Read-only views of a run folder (docs/dashboard.md).")
    app.include_router(build_router(source))
    app.router.on_shutdown.append(source.close)
    return app


def _check_run(path: Path, hint: str) -> None:
    if not (path / "metrics.jsonl").exists() and not (path / "config.yaml").exists():
        raise typer.BadParameter(f"{path} is not a run folder (no metrics.jsonl or config.yaml)", param_hint=hint)


def dash_cmd(
    run_dir: Annotated[Path, typer.Argument(help="run folder written by scalerl train --out")],
    host: Annotated[str, typer.Option(help="bind address")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port")] = 8080,
    compare: Annotated[list[Path] | None, typer.Option("--compare", help="another run folder (repeatable)")] = None,
) -> None:
    import uvicorn

    _check_run(run_dir, "RUN_DIR")
    for other in compare or []:
        _check_run(other, "--compare")
    typer.echo(f"dashboard of {run_dir} at http://{host}:{port}/")
    uvicorn.run(build_dash_app(run_dir, compare), host=host, port=port, log_level="warning")
