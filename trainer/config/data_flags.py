"""`--data DOMAIN=FILE[,FILE...]` and `--heldout DOMAIN=FILE[,FILE...]` of `scalerl train` as dotted overrides.

Each `--data` is one source (`data.sources`); repeated flags add sources in order and replace the YAML
file's list. A trailing `@WEIGHT` sets the source's mixing weight (default 1): `--data math=a.parquet@3
--data math=b.parquet` draws 75 % / 25 % of math from them. Without `--domains` the trained domains
become those named by `--data`, in order.
"""

from __future__ import annotations

import json

from scalerl.env.contracts.config_loader import ConfigError
from scalerl.env.contracts.domains import domain_names


def _split(flag: str, text: str) -> tuple[str, list[str]]:
    domain, sep, files = text.partition("=")
    domain = domain.strip()
    paths = [f.strip() for f in files.split(",") if f.strip()]
    if not sep or not paths:
        raise ConfigError(f"{flag} {text!r}: expected DOMAIN=FILE[,FILE...]")
    if domain not in domain_names():
        raise ConfigError(f"{flag} {text!r}: unknown domain {domain!r}; known: {', '.join(domain_names())}")
    return domain, paths


def _source(text: str) -> dict:
    """One `--data DOMAIN=FILE[,FILE...][@WEIGHT]` as a `data.sources` entry."""
    head, at, tail = text.rpartition("@")
    source: dict = {}
    if at:
        try:
            source["weight"] = float(tail)
        except ValueError:
            raise ConfigError(f"--data {text!r}: the weight after '@' must be a number, got {tail!r}") from None
        text = head
    domain, files = _split("--data", text)
    return {"domain": domain, "files": files, **source}


def data_overrides(data: list[str], heldout: list[str], *, domains_given: bool) -> list[str]:
    out = []
    if data:
        sources = [_source(text) for text in data]
        out.append("data.sources=" + json.dumps(sources))
        if not domains_given:
            out.append("domains=" + json.dumps(list(dict.fromkeys(s["domain"] for s in sources))))
    if heldout:
        held: dict[str, list[str]] = {}
        for text in heldout:
            domain, paths = _split("--heldout", text)
            held.setdefault(domain, []).extend(paths)
        out.append("data.heldout=" + json.dumps(held))
    return out
