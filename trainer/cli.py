"""`scalerl`: train and fit. Command modules expose `register(app)`; heavy imports inside commands.

Every `scalerl` command needs the `train` extra (torch and the rest). On the light install
(`pip install scalerl`, reward serving only) a command names the extra to install and exits 2 before
anything imports torch; `--help` still works there. Not checked: that the installed versions fit the pins.
"""

from __future__ import annotations

import importlib.util
import sys

import typer
from scalerl.env.cli import build_typer_app

COMMAND_MODULES = ("scalerl.trainer.commands.fit", "scalerl.trainer.commands.train", "scalerl.trainer.commands.ablate",
                   "scalerl.trainer.commands.profile", "scalerl.trainer.commands.dash")
# The import names of the `train` extra's distributions (pyproject.toml); tests/project/test_packaging.py keeps
# the two lists equal.
TRAIN_EXTRA_MODULES = ("torch", "transformers", "peft", "safetensors", "ray", "scipy", "matplotlib")
MISSING_EXTRA_EXIT = 2


def build_app() -> typer.Typer:
    return build_typer_app(
        "scalerl", "ScaleRL trainer.\n\nExample: scalerl train --domains math,code --max-steps 50", COMMAND_MODULES
    )


def missing_train_modules() -> list[str]:
    """The `train` extra's modules this environment cannot find (none are imported)."""
    return [name for name in TRAIN_EXTRA_MODULES if importlib.util.find_spec(name) is None]


def asks_for_help(argv: list[str]) -> bool:
    return not argv or "--help" in argv


def main() -> None:
    argv = sys.argv[1:]
    missing = [] if asks_for_help(argv) else missing_train_modules()
    if missing:
        command = next((arg for arg in argv if not arg.startswith("-")), "")
        print(f"scalerl {command}: the trainer is not installed (no module {', '.join(missing)}). "
              "Install it with: pip install 'scalerl[train]'", file=sys.stderr)
        raise SystemExit(MISSING_EXTRA_EXIT)
    build_app()()


if __name__ == "__main__":
    main()
