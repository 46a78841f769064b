"""`scalerl-env serve`: the reward server (see docs/server.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

EXAMPLE = """Serve rewards on loopback port 8000, recording verdicts with a prompt_id into a ledger:

  scalerl-env serve --port 8000 --workers 4 --ledger runs/ledger.duckdb

Replicas on other ports or machines score and commit their verdicts through that owner:

  scalerl-env serve --port 8001 --workers 4 --ledger-owner http://127.0.0.1:8000

Then: curl -s localhost:8000/v1/verify -H 'content-type: application/json' -d '{"items": [{"domain": "math",
"completion": "\\\\boxed{2}", "answer": "2"}]}'
"""


def register(app: typer.Typer) -> None:
    """Add the `serve` command to `app`."""

    @app.command("serve", help=EXAMPLE)
    def serve(
        host: Annotated[str | None, typer.Option(help="bind address (default 127.0.0.1, loopback)")] = None,
        port: Annotated[int | None, typer.Option(help="TCP port (default 8000; 0 picks a free one)")] = None,
        workers: Annotated[int | None, typer.Option(
            help="verifier worker processes: math workers and code sandbox slots (one server process)")] = None,
        ledger: Annotated[Path | None, typer.Option(
            help="DuckDB ledger file; items with a prompt_id are recorded")] = None,
        ledger_owner: Annotated[str | None, typer.Option(
            help="replica mode: URL of the server that owns the ledger (it runs with --ledger)")] = None,
        config: Annotated[Path | None, typer.Option(help="YAML file for ServerConfig (embeds `verifier:`)")] = None,
        set_: Annotated[list[str] | None, typer.Option(
            "--set", help="dotted override, e.g. --set limits.max_batch_items=256")] = None,
        token_file: Annotated[Path | None, typer.Option(
            help="bearer tokens, one `SCOPE TOKEN` per line (scopes: score, read)")] = None,
        insecure: Annotated[bool, typer.Option(
            "--insecure", help="allow a non-loopback --host without --token-file (anyone reaching the port)")] = False,
        ssl_certfile: Annotated[Path | None, typer.Option(help="PEM certificate: serve HTTPS")] = None,
        ssl_keyfile: Annotated[Path | None, typer.Option(help="PEM private key of --ssl-certfile")] = None,
        owner_token_file: Annotated[Path | None, typer.Option(
            help="file with the token presented to the ledger owner (default: $SCALERL_REWARD_TOKEN)")] = None,
    ) -> None:
        from scalerl.env.contracts.config_loader import ConfigError, load_config
        from scalerl.env.server.auth import exposure_problem, load_tokens
        from scalerl.env.server.server_config import ServerConfig

        secured = {"token_file": token_file, "insecure": insecure or None, "ssl_certfile": ssl_certfile,
                   "ssl_keyfile": ssl_keyfile, "owner_token_file": owner_token_file}
        try:
            cfg = load_config(ServerConfig, config, set_ or [])
            named = (("host", host), ("port", port), ("ledger", ledger), ("ledger_owner", ledger_owner))
            flags = {k: v for k, v in named if v is not None}
            tree = cfg.model_dump()
            tree.update({k: str(v) if isinstance(v, Path) else v for k, v in flags.items()})
            tree["security"].update({k: str(v) if isinstance(v, Path) else v
                                     for k, v in secured.items() if v is not None})
            if workers is not None:
                tree["verifier"]["math"]["workers"] = tree["verifier"]["code"]["slots"] = workers
            cfg = ServerConfig.model_validate(tree)
            # Refused before the app, the verifier pool or the ledger is loaded.
            problem = exposure_problem(cfg.host, cfg.security)
            if problem:
                raise ValueError(problem)
            if cfg.security.token_file:
                load_tokens(cfg.security.token_file)
        except (ConfigError, ValueError) as exc:
            typer.echo(f"serve: {exc}", err=True)
            raise typer.Exit(2) from None
        from scalerl.env.server.lifecycle import run_server

        run_server(cfg)
