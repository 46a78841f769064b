"""`scalerl-env`: verify, serve, ledger, data, doctor.

Each command group lives in `scalerl_env/commands/<name>.py` and exposes `register(app)`; heavy
imports happen inside the commands, so `scalerl-env --help` stays fast. Logging is configured here,
once, never at import time.
"""

from __future__ import annotations

import importlib
import logging

import typer

COMMAND_MODULES = ("verify", "doctor", "serve", "ledger", "data")


def build_typer_app(name: str, help: str, command_modules: tuple[str, ...]) -> typer.Typer:
    """A root typer app with `--verbose`, logging configured once, and each module's `register(app)`."""
    from scalerl.env.cli_help import FlagGroup, apply_help_layout

    app = typer.Typer(name=name, help=help, no_args_is_help=True, add_completion=False, cls=FlagGroup)

    @app.callback()
    def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="debug logging")) -> None:
        configure_logging(verbose)

    for module in command_modules:
        importlib.import_module(module).register(app)
    apply_help_layout(app)  # flags as flags, examples whole at 80 columns
    return app


def build_app() -> typer.Typer:
    return build_typer_app(
        "scalerl-env",
        "Verifiable-reward environment for RL on LLMs: domains math, code and if (instruction following), "
        "and a plug-in's.\n\nExample: scalerl-env verify --file items.jsonl",
        tuple(f"scalerl.env.commands.{name}" for name in COMMAND_MODULES),
    )


def configure_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def main() -> None:
    build_app()()


if __name__ == "__main__":
    main()
