"""`scalerl-env doctor` (filled in by its issue)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the `doctor` command(s) to `app`."""
