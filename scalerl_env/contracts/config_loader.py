"""Configuration: pydantic model defaults → YAML file → dotted CLI overrides → resolved YAML.

The pydantic model is the one source of truth for every default. A YAML file overrides it, dotted
overrides (`loss.eps_max=5`) override the YAML, and `write_resolved` stores the result atomically in
the run folder. Unknown keys are errors (models use `extra="forbid"`), with the dotted path named.
Each source is a named `Layer`; `layer_of_keys` says which layer set each value and `annotated_yaml`
prints the result with that name beside each value (`scalerl train --print-config`).
Override values are parsed as YAML (`k=4` is an int, `name="4"` a string); mappings merge key by key.

Not done here: environment variables are never read; a list given in a file or an override replaces
the whole list (only mappings merge).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class ConfigError(ValueError):
    """A configuration file or override that cannot be applied; the message names the key."""


def validation_problems(exc: ValidationError, *, whole: str = "(item)", first_only: bool = False) -> list[str]:
    """`field.path: message` for each error of a pydantic ValidationError: the one formatter that
    CLIs, adapters, ingest and config loading share; `whole` names an error on the object itself."""
    errors = exc.errors()[:1] if first_only else exc.errors()
    return [f"{'.'.join(str(p) for p in e['loc']) or whole}: {e['msg']}" for e in errors]


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b.c=value` → (["a", "b", "c"], value parsed as YAML scalar/list/dict)."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not of the form key.path=value")
    key, raw = text.split("=", 1)
    path = [p for p in key.strip().split(".") if p]
    if not path:
        raise ConfigError(f"override {text!r} has an empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {text!r}: value is not valid YAML ({exc})") from exc
    return path, value


def _set_path(tree: dict, path: list[str], value: Any) -> None:
    node = tree
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def _deep_merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class Layer:
    """One named source of configuration values (`preset paper`, `file run.yaml`, `flag`, `override`)."""

    name: str
    values: dict = dataclass_field(default_factory=dict)


def file_layer(yaml_path: str | Path) -> Layer:
    path = Path(yaml_path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    loaded = yaml.safe_load(path.read_text()) or {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path} must hold a mapping at top level")
    return Layer(f"file {path}", loaded)


def override_layer(texts: Iterable[str], name: str = "override") -> Layer:
    """Dotted `key.path=value` texts as one layer (later texts win key by key)."""
    tree: dict = {}
    for text in texts:
        key_path, value = parse_override(text)
        patch: dict = {}
        _set_path(patch, key_path, value)
        tree = _deep_merge(tree, patch)
    return Layer(name, tree)


def load_layers(model: type[M], layers: Iterable[Layer]) -> M:
    """Build `model` from its defaults and `layers`, each later one winning key by key."""
    tree: dict = {}
    for layer in layers:
        tree = _deep_merge(tree, layer.values)
    try:
        return model.model_validate(tree)
    except ValidationError as exc:  # re-raised with dotted field paths
        lines = validation_problems(exc, whole="(config)")
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines)) from exc


def load_config(
    model: type[M], yaml_path: str | Path | None = None, overrides: Iterable[str] = (), base: dict | None = None
) -> M:
    """Build `model` from its defaults, `base` (a named preset's values), an optional YAML file and dotted
    overrides, each later one winning key by key."""
    layers = [Layer("base", dict(base or {}))]
    if yaml_path is not None:
        layers.append(file_layer(yaml_path))
    return load_layers(model, [*layers, override_layer(overrides)])


def leaf_paths(tree: dict, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path, value) of every leaf of a nested mapping; a list or an empty mapping is a leaf."""
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            yield from leaf_paths(value, (*prefix, str(key)))
        else:
            yield (*prefix, str(key)), value


def layer_of_keys(layers: Iterable[Layer]) -> dict[tuple[str, ...], str]:
    """For each leaf key any layer sets, the name of the last layer that set it (the one that won)."""
    won: dict[tuple[str, ...], str] = {}
    for layer in layers:
        for path, _ in leaf_paths(layer.values):
            for set_before in [p for p in won if p[:len(path)] == path]:  # a mapping replaced as a whole
                del won[set_before]
            won[path] = layer.name
    return won


def annotated_yaml(cfg: BaseModel, provenance: dict[tuple[str, ...], str]) -> str:
    """The resolved configuration as YAML with `# <layer>` after each value a layer set; values without
    a comment are the class defaults. Still valid YAML (`load_config` reads it back unchanged)."""
    lines, stack = [], []  # stack: (indent, key) of the mappings enclosing the current line
    for line in yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False, width=10**9).splitlines():
        body = line.lstrip(" ")
        indent = len(line) - len(body)
        key = body.split(":", 1)[0] if ":" in body and not body.startswith(("- ", "'", '"')) else None
        if key is None:
            lines.append(line)
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key))
        path = tuple(k for _, k in stack)
        layer = provenance.get(path)
        lines.append(f"{line}  # {layer}" if layer else line)
    return "\n".join(lines) + "\n"


def atomic_write_text(path: str | Path, text: str | bytes) -> Path:
    """Write `text` (or bytes as they are) to `path` via a temporary file and rename: readers never see a
    partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def dump_yaml(cfg: BaseModel) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)


def write_resolved(cfg: BaseModel, path: str | Path) -> Path:
    """Store the fully resolved configuration (every default made explicit) atomically."""
    return atomic_write_text(path, dump_yaml(cfg))


def reference_markdown(model: type[BaseModel], prefix: str = "", defaults: dict | None = None) -> list[str]:
    """One Markdown table row per leaf setting of `model` (dotted key, default, description), nested
    models expanded with the defaults their parent gives them: the configuration docs are generated from
    the models, never restated by hand."""
    rows: list[str] = []
    defaults = model().model_dump(mode="json") if defaults is None else defaults
    for attribute, field in model.model_fields.items():
        name = field.alias or attribute  # the key a file or an override names (`verifier.if`, field `if_`)
        key = f"{prefix}{name}"
        sub = field.annotation if isinstance(field.annotation, type) else None
        if sub is not None and issubclass(sub, BaseModel) and isinstance(defaults.get(name), dict):
            rows.extend(reference_markdown(sub, key + ".", defaults[name]))
            continue
        value = defaults.get(name)
        if isinstance(value, str) and "\n" in value:  # one table row: the escaped form
            default = json.dumps(value)
        else:
            default = yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("...").strip()
        text = (field.description or "").replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{key}` | `{default}` | {text} |")
    extra_model = getattr(model, "EXTRA_MODEL", None)  # typed open sections, e.g. one per domain
    keys = {field.alias or attribute for attribute, field in model.model_fields.items()}
    for name in (n for n in defaults if n not in keys and extra_model is not None):
        rows.extend(reference_markdown(extra_model, f"{prefix}{name}.", defaults[name]))
    return rows
