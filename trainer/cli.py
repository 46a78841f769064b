"""`scalerl`: train and fit. Command modules expose `register(app)`; heavy imports inside commands."""

from __future__ import annotations

import typer
from scalerl.env.cli import build_typer_app

COMMAND_MODULES = ("scalerl.trainer.commands.fit", "scalerl.trainer.commands.train", "scalerl.trainer.commands.ablate",
                   "scalerl.trainer.commands.profile", "scalerl.trainer.commands.dash")


def build_app() -> typer.Typer:
    return build_typer_app(
        "scalerl", "ScaleRL trainer.\n\nExample: scalerl train --domains math,code --max-steps 50", COMMAND_MODULES
    )


def main() -> None:
    build_app()()


if __name__ == "__main__":
    main()
