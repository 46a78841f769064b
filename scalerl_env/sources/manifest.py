"""Source manifests: one YAML file per public dataset in `datasets/manifests/`, mapping its columns.

A manifest says where the data lives on the Hugging Face hub (path, configs, splits), which column
holds the problem, the answer or the tests, the reference solution and the difficulty, and how
each is read. Reading rows (rows.py) is driven by it, so supporting a renamed column is a YAML edit.

Guarantees: unknown keys are errors (typos do not silently fall back to defaults); every manifest
shipped with the project is loaded by the tests. Non-guarantee: that the hub still serves the data
under the same names (nothing is downloaded here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError, field_validator
from scalerl.env.contracts.records import Domain, Strict
from scalerl.verifiers.code.converters import CONVERTERS

DATASETS_DIR = Path(__file__).resolve().parents[2] / "datasets"
MANIFEST_DIR = DATASETS_DIR / "manifests"
FIXTURE_DIR = DATASETS_DIR / "fixtures"


class HubSpec(Strict):
    path: str = Field(description="hub dataset name, e.g. openai/gsm8k")
    configs: list[str | None] = Field(default_factory=lambda: [None], description="configs (subsets)")
    splits: list[str] = Field(default_factory=lambda: ["train"])


class Difficulty(Strict):
    """How a source's difficulty becomes a pass-rate prior in [0, 1] (see rows.difficulty_prior)."""

    column: str
    kind: Literal["pass_rate", "level", "ordinal"]
    levels: int | None = Field(default=None, ge=2, description="level: highest level (lowest is 1)")
    order: list[str] = Field(default_factory=list, description="ordinal: labels from easiest to hardest")


class SourceManifest(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    description: str
    domain: Domain
    license: str
    hub: HubSpec
    problem: str = Field(description="column holding the problem statement (a chat-message list: its last user turn)")
    problem_template: str = Field(
        default="{problem}",
        description="str.format template over the row's columns (lists joined by newlines) and {problem}",
    )
    answer: str | None = Field(default=None, description="math: column holding the reference answer")
    answer_from: Literal["column", "gsm8k", "boxed"] = Field(
        default="column", description="column: as is; gsm8k: text after '####'; boxed: last \\boxed{} in it"
    )
    skip_answers: list[str] = Field(default_factory=list, description="answers marking unverifiable rows")
    solution: str | None = Field(default=None, description="column with a reference solution")
    solution_format: Literal["text", "json_list", "list", "codecontests", "humaneval"] = "text"
    converter: str | None = Field(default=None, description="code: a converter of scalerl.verifiers.code.converters")
    starter_code: str | None = None
    difficulty: Difficulty | None = None
    id: str | None = Field(default=None, description="column with the source's own row id (kept in metadata)")
    metadata_columns: list[str] = Field(default_factory=list)
    instruction: str | None = Field(default=None, description="overrides the domain's default instruction")
    fixtures: dict[str, str] = Field(
        default_factory=dict, description="config (or 'default') -> file in datasets/fixtures/"
    )

    @field_validator("converter")
    @classmethod
    def _known_converter(cls, name: str | None) -> str | None:
        if name is not None and name not in CONVERTERS:  # a setup error, not one error per row
            raise ValueError(f"unknown converter {name!r}; known: {', '.join(CONVERTERS)}")
        return name


class ManifestError(ValueError):
    """A manifest that is missing or invalid; the message names the file and the field."""


def list_sources() -> list[str]:
    return sorted(p.stem for p in MANIFEST_DIR.glob("*.yaml"))


def load_manifest(name_or_path: str | Path) -> SourceManifest:
    """The manifest named `name_or_path` (a source name, or a path to a YAML file)."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = MANIFEST_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise ManifestError(f"unknown source {str(name_or_path)!r}; known: {', '.join(list_sources())}")
    try:
        return SourceManifest.model_validate(yaml.safe_load(path.read_text()))
    except (yaml.YAMLError, ValidationError) as exc:
        raise ManifestError(f"{path}: {exc}") from exc


def fixture_path(manifest: SourceManifest, config: str | None = None) -> Path:
    key = config or next(iter(manifest.fixtures), "default")
    if key not in manifest.fixtures:
        raise ManifestError(f"{manifest.name}: no fixture for config {key!r}; have {sorted(manifest.fixtures)}")
    return FIXTURE_DIR / manifest.fixtures[key]
