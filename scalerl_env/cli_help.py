"""`--help` layout shared by both CLIs (`scalerl-env`, `scalerl`), applied once by `scalerl.env.cli.build_typer_app`.

Guarantees, for every command and group of an app:
- an on/off option shows as a flag (`--dry-run`), never with a value placeholder (`--dry-run <bool>`);
- an example command (a help line that starts with `scalerl ` or `scalerl-env `, after an optional
  `Example:` / `Examples:`) never wraps at 80 columns: a trailing `# comment` that does not fit moves to its
  own line above the command, and a command longer than `EXAMPLE_WIDTH` is broken between arguments with a
  shell continuation (` \\`), so each line is whole and the lines paste as one command.
Not guaranteed: prose wraps where the terminal wraps it; a single argument longer than the width stays whole.
"""

from __future__ import annotations

import inspect
import re
import shlex
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.models import DefaultPlaceholder

EXAMPLE_WIDTH = 76  # 80 columns less the help panel's padding
INDENT = "  "
EXAMPLE = re.compile(r"^(?P<lead>\s*)(?P<label>Examples?:\s*)?(?P<command>scalerl(?:-env)? .*)$")


def flags_as_flags(params: list[Any]) -> list[Any]:
    """`params`, each on/off option with an empty type column (it takes no value; typer prints `<bool>`)."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class FlagCommand(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:  # `--help` is added here, not in `params`
        return flags_as_flags(super().get_params(ctx))


class FlagGroup(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return flags_as_flags(super().get_params(ctx))


def apply_help_layout(app: typer.Typer) -> None:
    """Flags as flags and unwrapped examples for every command and group of `app` (in place, before the
    click commands are built)."""
    for command in app.registered_commands:
        command.cls = FlagCommand if command.cls in (None, TyperCommand) else command.cls  # a command's own: kept
        command.help = format_examples(command.help or inspect.getdoc(command.callback) or "")
    for group in app.registered_groups:
        for info in (group, group.typer_instance.info):
            info.cls = FlagGroup if info.cls in (None, TyperGroup) or isinstance(info.cls, DefaultPlaceholder) \
                else info.cls
        if group.help:
            group.help = format_examples(group.help)
        if isinstance(group.typer_instance.info.help, str):
            group.typer_instance.info.help = format_examples(group.typer_instance.info.help)
        apply_help_layout(group.typer_instance)


def format_examples(text: str) -> str:
    """`text` with every example line laid out to fit `EXAMPLE_WIDTH` (see the module docstring)."""
    out = []
    for line in inspect.cleandoc(text).splitlines():
        match = EXAMPLE.match(line)
        if match is None or len(line) <= EXAMPLE_WIDTH:
            out.append(line)
            continue
        lead, label = match["lead"], (match["label"] or "").strip()
        if label:
            out += [lead + label, ""]
            lead += INDENT
        command, _, comment = match["command"].partition("  #")
        if comment.strip():
            out.append(f"{lead}# {comment.strip().removeprefix('#').strip()}")
        out += break_command(command.strip(), lead)
    return "\n".join(out)


def break_command(command: str, lead: str) -> list[str]:
    """`command` as lines of at most `EXAMPLE_WIDTH` characters, broken between arguments (never inside a
    quoted one) with ` \\` continuations; later lines are indented two more spaces. An option stays with its
    value unless the two do not fit on one line."""
    continued = EXAMPLE_WIDTH - len(lead) - len(INDENT) - len(" \\")  # the room of a continuation line
    pieces: list[str] = []
    for word in _words(command):
        for part in word.split(" ", 1) if len(word) > continued else [word]:
            room = continued + (0 if len(pieces) > 1 else len(INDENT))
            if pieces and len(pieces[-1]) + 1 + len(part) <= room:
                pieces[-1] += " " + part
            else:
                pieces.append(part)
    last = len(pieces) - 1
    return [lead + (INDENT if i else "") + piece + (" \\" if i < last else "") for i, piece in enumerate(pieces)]


def _words(command: str) -> list[str]:
    """Shell words as written (quotes kept); an option and the value after it stay together (`--out runs/x`)."""
    lexer = shlex.shlex(command, posix=False)
    lexer.whitespace_split = True
    words: list[str] = []
    for word in lexer:
        if words and re.fullmatch(r"--[\w-]+", words[-1]) and not word.startswith("-"):
            words[-1] += " " + word
        else:
            words.append(word)
    return words
