"""`scalerl`: train and fit. Command modules expose `register(app)`; heavy imports inside commands."""

from __future__ import annotations

import importlib

import typer

from scalerl_env.cli import configure_logging

COMMAND_MODULES = ("trainer.fit_cli", "trainer.train_cli")


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="scalerl",
        help="ScaleRL trainer.\n\nExample: scalerl train --domains math,code --max-steps 50",
        no_args_is_help=True,
        add_completion=False,
    )

    @app.callback()
    def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="debug logging")) -> None:
        configure_logging(verbose)

    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)
    return app


def main() -> None:
    build_app()()


if __name__ == "__main__":
    main()
