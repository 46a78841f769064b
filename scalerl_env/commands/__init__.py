"""Command groups of `scalerl-env`; each module exposes `register(app: typer.Typer)`."""
