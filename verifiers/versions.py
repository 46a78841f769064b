"""Which verifier scored a verdict: the version of a domain's verifier code and a digest of its settings.

`code_version(module)` names the code: the version of the distribution that installs the verifier's
module, then `+` and a short sha256 of every `.py` file of the module's package (its folder, recursively),
e.g. `scalerl-0.1.0+3f9a12bc`. The source hash makes an edit in an editable checkout a new version without a
release; a plug-in domain's version is its own distribution's (`chem-rlvr-1.2.0+...`), and code outside any
distribution is `unversioned+...`. Computed once per package per process.

`settings_digest(section, rewards)` is the first 12 hex digits of the sha256 of the canonical JSON (sorted
keys) of the domain's `verifier.<domain>` section and the reward table. It covers every field of the
section, so a setting that cannot change a verdict (worker counts) also gives a new digest: two digests
may score alike, one digest never scores differently for a settings reason.

Not covered: code outside the domain's package that a verifier calls (the batch API, the contracts, a
third-party library such as math-verify: its version is not in the stamp).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel

SOURCE_HASH_CHARS = 8
DIGEST_CHARS = 12


@functools.cache
def _distribution(top: str) -> str:
    """`name-version` of the distribution that installs the top-level package `top` (`unversioned`)."""
    try:  # the usual case, and cheap: the distribution is named as its package (scalerl)
        return f"{top}-{metadata.version(top)}"
    except metadata.PackageNotFoundError:
        pass
    for name in metadata.packages_distributions().get(top, []):  # scans every installed distribution
        try:
            return f"{name}-{metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return "unversioned"


@functools.cache
def code_version(module_name: str) -> str:
    """The version of the verifier code in `module_name`'s package (see the module docstring)."""
    module = importlib.import_module(module_name)
    package = module_name if hasattr(module, "__path__") else module_name.rpartition(".")[0] or module_name
    file = getattr(importlib.import_module(package), "__file__", None)
    digest = hashlib.sha256()
    if file is not None:
        root = Path(file).parent
        sources = sorted(root.rglob("*.py")) if Path(file).name == "__init__.py" else [Path(file)]
        for path in sources:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{_distribution(module_name.partition('.')[0])}+{digest.hexdigest()[:SOURCE_HASH_CHARS]}"


def settings_digest(section: BaseModel | None, rewards: BaseModel) -> str:
    """Short sha256 of the canonical JSON of a domain's settings section and the reward table."""
    data: dict[str, Any] = {"section": None if section is None else section.model_dump(mode="json", by_alias=True),
                            "rewards": rewards.model_dump(mode="json", by_alias=True)}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def verdict_stamp(name: str, verifier: object, config: Any) -> dict[str, str]:
    """The details every verdict of domain `name` carries: its verifier's code version and settings digest
    (`config` is the pool's `VerifierConfig`)."""
    return {"verifier_version": code_version(type(verifier).__module__),
            "settings_digest": settings_digest(config.section(name), config.rewards)}
