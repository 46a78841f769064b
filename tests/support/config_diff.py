"""Which dotted config keys differ between two resolved configurations (dumped to dicts)."""

from __future__ import annotations


def changed_keys(a: dict, b: dict, prefix: str = "") -> set[str]:
    out = set()
    for key in a.keys() | b.keys():
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            out |= changed_keys(va, vb, f"{prefix}{key}.")
        elif va != vb:
            out.add(f"{prefix}{key}")
    return out
