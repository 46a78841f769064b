"""`--help` of every command of both CLIs (`scalerl-env`, `scalerl`) at 80 columns: flags show as flags
(no `<bool>`), and every example command is laid out in whole lines that do not wrap. And every command a
docstring, comment or doc names in backticks (`scalerl profile`, `scalerl-env data prepare`) exists."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
from scalerl.env.cli import build_app as env_app
from scalerl.env.cli_help import EXAMPLE_WIDTH, format_examples
from scalerl.trainer.cli import build_app as trainer_app
from typer.testing import CliRunner

APPS = {"scalerl-env": env_app, "scalerl": trainer_app}
ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("scalerl_env", "verifiers", "curriculum", "trainer", "docs", "benchmarks", "examples", "datasets")
NAMED_COMMAND = re.compile(r"`(scalerl(?:-env)?)((?:\s+(?:#\s*)?[a-z][\w-]*){1,2})")  # a comment may wrap it


def command_paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [path]
    for name, sub in getattr(command, "commands", {}).items():  # a group (typer's own click)
        paths += command_paths(sub, (*path, name))
    return paths


def help_text(app_name: str, path: tuple[str, ...], columns: int) -> str:
    # COLUMNS only: typer.rich_utils reads TERMINAL_WIDTH once, at its import, and would keep that width for
    # every later test of the process.
    result = CliRunner(env={"COLUMNS": str(columns)}).invoke(
        APPS[app_name](), [*path, "--help"])
    assert result.exit_code == 0, result.output
    return result.output


def example_blocks(text: str) -> list[list[str]]:
    """Each example as printed: a line starting with a CLI name, and the continuation lines after it."""
    lines = [line.strip() for line in text.split("╭")[0].splitlines()]
    blocks = []
    for i, line in enumerate(lines):
        if line.startswith(("scalerl ", "scalerl-env ")):
            block = [line]
            while block[-1].endswith("\\") and i + len(block) < len(lines):
                block.append(lines[i + len(block)])
            blocks.append(block)
    return blocks


CASES = [(name, path) for name, build in APPS.items() for path in command_paths(typer.main.get_command(build()))]


@pytest.mark.parametrize("app_name,path", CASES, ids=[" ".join((n, *p)) for n, p in CASES])
def test_help_at_80_columns_shows_flags_as_flags_and_examples_whole(app_name, path):
    narrow = help_text(app_name, path, 80)
    assert "<bool>" not in narrow
    wide_examples = example_blocks(help_text(app_name, path, 400))
    narrow_lines = [line.strip() for line in narrow.splitlines()]
    for block in wide_examples:  # what a wide terminal shows, line for line, is what 80 columns show
        start = narrow_lines.index(block[0]) if block[0] in narrow_lines else -1
        assert start >= 0 and narrow_lines[start:start + len(block)] == block, (block, narrow)


def test_the_train_examples_are_found_by_the_check():
    blocks = example_blocks(help_text("scalerl", ("train",), 400))
    assert len(blocks) >= 8 and ["scalerl train"] in blocks


def test_a_long_example_is_broken_between_arguments_and_pastes_as_one_command():
    command = ('scalerl-env ledger query "SELECT * FROM pass_rates ORDER BY pass_rate LIMIT 10" '
               "--ledger runs/ledger.duckdb --format json")
    text = format_examples(f"Query.\n\nExample: {command}  # one statement, read-only")
    lines = text.splitlines()
    assert all(len(line) <= EXAMPLE_WIDTH for line in lines)
    assert "  # one statement, read-only" in lines and "Example:" in lines
    body = lines[lines.index("  # one statement, read-only") + 1:]
    assert all(line.endswith(" \\") for line in body[:-1]) and len(body) > 1
    assert " ".join(line.removesuffix(" \\").strip() for line in body) == command
    assert '"SELECT * FROM pass_rates ORDER BY pass_rate LIMIT 10"' in text  # a quoted argument is never split


def unknown_commands(text: str, apps: dict[str, Any]) -> list[str]:
    """The backticked `scalerl ...` / `scalerl-env ...` names in `text` whose command (or subcommand) does not exist."""
    bad = []
    for match in NAMED_COMMAND.finditer(text):
        command = apps[match[1]]
        for word in match[2].replace("#", " ").split():
            subcommands = getattr(command, "commands", None)
            if not subcommands:  # a command's arguments follow
                break
            if word not in subcommands:
                bad.append(" ".join([match[1], *match[2].replace("#", " ").split()]))
                break
            command = subcommands[word]
    return bad


def test_every_command_named_in_the_source_and_the_docs_exists():
    apps = {name: typer.main.get_command(build()) for name, build in APPS.items()}
    assert unknown_commands("`scalerl curriculum\n    # profile` and `scalerl-env data prepare`", apps) == [
        "scalerl curriculum profile"]  # what the presets' comment named once
    files = [*ROOT.glob("*.md"), *(p for d in SCANNED for p in (ROOT / d).rglob("*") if p.suffix in (".py", ".md"))]
    found = {f"{p.relative_to(ROOT)}: {name}" for p in files
             for name in unknown_commands(p.read_text(errors="ignore"), apps)}
    assert not found, sorted(found)


def test_an_option_whose_value_does_not_fit_beside_it_moves_the_value_to_the_next_line():
    command = "scalerl ablate --variants " + ",".join(f"loo-variant{i}" for i in range(5)) + " --seeds 2 --budget 150"
    lines = format_examples(f"Ablate.\n\nExample: {command}").splitlines()
    body = lines[lines.index("Example:") + 2:]
    assert all(len(line) <= EXAMPLE_WIDTH for line in lines) and len(body) > 1
    assert " ".join(line.removesuffix(" \\").strip() for line in body) == command
