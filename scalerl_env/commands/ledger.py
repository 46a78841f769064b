"""`scalerl-env ledger` (filled in by its issue)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the `ledger` command(s) to `app`."""
