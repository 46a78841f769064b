"""Entry-point registries: the one loader behind the domain and environment registries.

Guarantees: every entry point of the group is loaded and type-checked; its name must equal the spec's
`name`; two different entry points naming one spec are an error naming both; the result is ordered by
the spec's `rank`, then name. Not guaranteed: caching (each registry caches its own result).
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any


def load_specs(group: str, spec_type: type, noun: str) -> dict[str, Any]:
    """Every spec declared in the entry-point `group`, by name; `noun` names one in error messages."""
    found: dict[str, tuple[Any, str]] = {}
    for ep in entry_points(group=group):
        spec = ep.load()
        if not isinstance(spec, spec_type):
            raise TypeError(f"entry point {ep.value!r} of {group} is not a {spec_type.__name__}")
        if spec.name != ep.name:
            raise ValueError(f"entry point {ep.name!r} ({ep.value}) declares {noun} {spec.name!r}")
        if spec.name in found and found[spec.name][1] != ep.value:
            raise ValueError(f"{noun} {spec.name!r} is declared twice: {found[spec.name][1]} and {ep.value}")
        found[spec.name] = (spec, ep.value)
    return {name: spec for name, (spec, _) in sorted(found.items(), key=lambda kv: (kv[1][0].rank, kv[0]))}
