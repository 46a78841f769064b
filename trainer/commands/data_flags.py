"""`--data DOMAIN=FILE[,FILE...]` and `--heldout DOMAIN=FILE[,FILE...]` of `scalerl train` as dotted overrides.

Each `--data` is one source (`data.sources`, weight 1); repeated flags add sources in order and replace
the YAML file's list. Without `--domains` the trained domains become those named by `--data`, in order.
"""

from __future__ import annotations

import json

from scalerl_env.config import ConfigError
from scalerl_env.records import DOMAINS


def _split(flag: str, text: str) -> tuple[str, list[str]]:
    domain, sep, files = text.partition("=")
    domain = domain.strip()
    paths = [f.strip() for f in files.split(",") if f.strip()]
    if not sep or not paths:
        raise ConfigError(f"{flag} {text!r}: expected DOMAIN=FILE[,FILE...]")
    if domain not in DOMAINS:
        raise ConfigError(f"{flag} {text!r}: unknown domain {domain!r}; known: {', '.join(DOMAINS)}")
    return domain, paths


def data_overrides(data: list[str], heldout: list[str], *, domains_given: bool) -> list[str]:
    out = []
    if data:
        sources = [dict(zip(("domain", "files"), _split("--data", text))) for text in data]
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
