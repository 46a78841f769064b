"""The study plan: one run per variant x seed, each with the same compute budget, and its manifest.

A run's configuration is `TrainConfig` defaults -> the `study` preset (`scalerl.trainer.config.presets`: no
wall-time stop, a step limit out of reach, 2,500 held-out samples per evaluation) -> `--config` -> the
train flags -> the study's shared overrides -> the variant's overrides -> the study's own keys (seed,
budget), so a variant always wins over a shared override and every run stops at the same compute.
The study's own keys:
- `pipeline.seed=<i>` for seed i: the sampler's data order, the rollout and engine sampling. The
  held-out set (`data.seed`) and the starting policy (the cached warm start, `warm_start.seed`) stay
  fixed, so runs of one variant differ only by sampling and order, and variants only by the variant.
- `pipeline.budget=<budget>` and `pipeline.budget_axis=<compute>` (the preset has no wall-time stop and
  no reachable step limit): the RL phase stops at the first step whose compute reaches the budget, so
  runs of one study have equal compute to within one step. On `samples` (or `tokens`, `flops`) that
  holds whatever the machine's load; on `device_s` (wall x devices, the paper's axis, where
  PipelineRL's overlap shows) a busier machine buys fewer steps (`scalerl.trainer.run.compute`).
- `validation.min_evaluations_per_domain=<eval_samples>` when `--eval-samples` is given (the preset's
  2,500 otherwise): the binomial standard error
  of one evaluation is then at most sqrt(0.25 / 2500) = 0.01, half the paper's ±0.02 margin on A, so
  a difference the margin flags is not one evaluation's noise.

`DIR/manifest.json` lists every run with its overrides and status; it is rewritten atomically after
each run. A run whose folder holds `summary.json` is finished and skipped; a run with a checkpoint
but no summary resumes from it; a run folder with neither is started again from scratch. A finished
run whose recorded overrides differ from the plan is an error (its numbers would not be comparable).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator
from scalerl.env.contracts.config_loader import ConfigError, atomic_write_text
from scalerl.env.contracts.records import Strict
from scalerl.trainer.ablate.variants import Variant, load_user_variants, overrides_for, resolve
from scalerl.trainer.config.presets import PRESETS
from scalerl.trainer.config.train import ComputeAxis

MANIFEST = "manifest.json"
STUDY_PRESET = "study"
EVAL_SAMPLES: int = PRESETS[STUDY_PRESET]["validation"]["min_evaluations_per_domain"]


class StudySpec(Strict):
    """Everything `scalerl ablate` was asked; stored in the manifest."""

    variants: list[str] = Field(min_length=1)
    variants_file: str | None = None
    seeds: int = Field(default=2, ge=1)
    budget: float = Field(gt=0, description="RL compute per run, on the `compute` axis")
    compute: ComputeAxis = Field(default="device_s", description="the axis of the budget and the fits")

    @model_validator(mode="before")
    @classmethod
    def _device_s_manifests(cls, data: Any) -> Any:
        # A manifest written before the compute axis existed budgeted wall s x devices.
        if isinstance(data, dict) and "budget_device_s" in data:
            data = {**{k: v for k, v in data.items() if k != "budget_device_s"},
                    "budget": data["budget_device_s"], "compute": "device_s"}
        return data
    out: str
    config: str | None = None
    domains: str | None = None
    model: str | None = None
    engine: str | None = None
    overrides: list[str] = Field(default_factory=list, description="shared by every run")
    ray_address: str | None = Field(default=None, description="run the runs as Ray tasks on this cluster")
    eval_samples: int | None = Field(
        default=None, ge=1, description="held-out samples per domain per evaluation in every run "
        "(validation.min_evaluations_per_domain); None = the study preset's 2,500 (standard error <= 0.01)")
    fit_fraction: float = Field(
        default=0.5, gt=0, le=1, description="fit on compute <= this share of the budget (the paper: half); "
        "1 fits every point and leaves nothing to score the extrapolation on")
    burn_in: float | None = Field(default=None, ge=0, description="drop points with 0 < compute < this")


class RunEntry(Strict):
    variant: str
    seed: int
    folder: str = Field(description="relative to the study folder")
    overrides: list[str]
    status: Literal["planned", "running", "finished", "failed"] = "planned"
    error: str | None = None
    wall_s: float | None = None
    steps: int | None = None
    worker: str | None = Field(default=None, description="host:pid of the process that trained the run")
    load_avg: float | None = Field(
        default=None, description="machine load (1-min average) at the start and end of the run, averaged: "
        "a wall-time budget buys less work on a busier machine")


class Manifest(Strict):
    study: StudySpec
    variants: list[Variant]
    runs: list[RunEntry]


def study_overrides(seed: int, spec: StudySpec) -> list[str]:
    samples = [] if spec.eval_samples is None else [f"validation.min_evaluations_per_domain={spec.eval_samples}"]
    return [f"pipeline.seed={seed}", f"pipeline.budget={spec.budget}", f"pipeline.budget_axis={spec.compute}",
            *samples]


def build_run_config(spec: StudySpec, overrides: list[str]):
    """The resolved TrainConfig of one run (the same checks as `scalerl train`)."""
    from scalerl.trainer.config.resolve import RunFlags, resolve_config

    flags = RunFlags(domains=spec.domains, model=spec.model, engine=spec.engine)
    return resolve_config(Path(spec.config) if spec.config else None, overrides, flags, study_preset=STUDY_PRESET)[0]


def plan(spec: StudySpec) -> Manifest:
    """Every run of the study with its full override list; bad variants or overrides fail here."""
    user = load_user_variants(Path(spec.variants_file)) if spec.variants_file else {}
    variants = resolve(spec.variants, user)
    build_run_config(spec, spec.overrides)  # the shared part alone first: its errors name no variant
    runs = []
    # seed-major: every variant's first seed before any second seed, so a study stopped early (or
    # given a larger --seeds later) has compared every variant at least once
    for seed in range(spec.seeds):
        for v in variants:
            ov = [*spec.overrides, *overrides_for(v), *study_overrides(seed, spec)]
            build_run_config(spec, ov)  # validate now, not an hour into the study
            runs.append(RunEntry(variant=v.name, seed=seed, folder=f"runs/{v.name}/seed{seed}", overrides=ov))
    return Manifest(study=spec, variants=variants, runs=runs)


def merge_previous(manifest: Manifest, out: Path) -> Manifest:
    """Carry statuses over from an earlier invocation; refuse finished runs planned differently."""
    path = out / MANIFEST
    if not path.exists():
        return manifest
    old = {(r.variant, r.seed): r for r in Manifest.model_validate_json(path.read_text()).runs}
    for run in manifest.runs:
        prev = old.get((run.variant, run.seed))
        if prev is not None and run_state(out / run.folder) == "finished" and prev.overrides != run.overrides:
            raise ConfigError(f"{out / run.folder} finished with overrides {prev.overrides}, but this study "
                              f"plans {run.overrides}; use another --out or remove that run folder")
        if prev is not None:
            run.wall_s, run.steps, run.load_avg, run.error = prev.wall_s, prev.steps, prev.load_avg, prev.error
            run.status = "failed" if prev.status == "failed" else run.status
        if run_state(out / run.folder) == "finished":
            run.status = "finished"
    return manifest


def run_state(folder: Path) -> Literal["finished", "resumable", "new"]:
    """finished: summary.json; resumable: a checkpoint to continue from; new: nothing usable."""
    if (folder / "summary.json").is_file():
        return "finished"
    if (folder / "checkpoints" / "latest").exists():
        return "resumable"
    return "new"


def prepare_folder(folder: Path) -> bool:
    """Make `folder` ready to train into; returns True when the run resumes from its checkpoint."""
    state = run_state(folder)
    if state == "resumable":
        return True
    if folder.exists():  # started but killed before its first checkpoint: nothing worth keeping
        shutil.rmtree(folder)
    return False


def write_manifest(manifest: Manifest, out: Path) -> None:
    for run in manifest.runs:
        if run_state(out / run.folder) == "finished":
            run.status = "finished"
    atomic_write_text(out / MANIFEST, json.dumps(manifest.model_dump(mode="json"), indent=2))
