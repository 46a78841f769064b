"""`scalerl-env verify` (filled in by its issue)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the `verify` command(s) to `app`."""
