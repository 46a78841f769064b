"""Read compute/reward series for `scalerl fit` from a run's metrics.jsonl or a CSV file.

metrics.jsonl (written by the trainer, one JSON object per line). A line is a validation point when
it has a ``val`` object; the keys read are::

    {"step": 300,
     "compute_device_s": 1.08e7,          # cumulative accelerator-seconds (all devices) at this step
     "compute_flops": 3.1e20,             # cumulative generation + training FLOPs (needed for --compute flops)
     "compute_samples": 49152,            # samples taken (--compute samples); compute_tokens: their tokens
     "val": {"math": {"pass_rate": 0.41}, "code": {"pass_rate": 0.22}}}

Lines without ``val`` (training steps) are skipped, as are validation lines that lack the requested
domain. Compute choices: ``device_hours`` (``compute_device_s / 3600``, the paper's GPU-hours; the
default), ``device_s``, ``samples``, ``tokens`` or ``flops`` (``scalerl.trainer.run.compute``). The initial
evaluation, if the trainer logs one, has compute 0 and pins R0. Guarantees: a malformed line, a
missing key or a non-increasing compute is a ``FitError`` naming the file and line; nothing is
silently dropped except the skips above.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict
from scalerl.env.contracts.sigmoid import COMPUTE_AXES
from scalerl.trainer.fit.model import FitError
from scalerl.trainer.run.log import metric_records

ComputeKind = Literal["device_hours", "device_s", "samples", "tokens", "flops"]
COMPUTE_KEYS = {axis: (key, scale) for axis, (key, scale, _) in COMPUTE_AXES.items()}
COMPUTE_LABELS = {axis: label for axis, (_, _, label) in COMPUTE_AXES.items()}


class Series(BaseModel):
    """One curve to fit: a label, its compute and reward, and the file lines they came from."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True)
    label: str
    compute: np.ndarray
    reward: np.ndarray
    lines: list[int]


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FitError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def _check_increasing(series: Series, path: Path) -> Series:
    for k in range(1, series.compute.size):
        if series.compute[k] <= series.compute[k - 1]:
            raise FitError(
                f"{path}:{series.lines[k]}: compute {series.compute[k]:g} is not larger than "
                f"{series.compute[k - 1]:g} on line {series.lines[k - 1]} (series {series.label!r})"
            )
    return series


def load_metrics(
    path: Path,
    *,
    domain: str | None = None,
    compute: ComputeKind = "device_hours",
    metric: str = "pass_rate",
    label_prefix: str | None = None,
) -> list[Series]:
    """Validation series per domain (only `domain` if given), in first-seen domain order."""
    key, scale = COMPUTE_KEYS[compute]
    prefix = label_prefix if label_prefix is not None else path.parent.name or path.stem
    points: dict[str, list[tuple[int, float, float]]] = {}
    try:
        rows = list(metric_records(path, strict=True))
    except ValueError as exc:
        raise FitError(str(exc)) from exc
    for lineno, row in rows:
        if not isinstance(row, dict) or "val" not in row:
            continue
        if not isinstance(row["val"], dict):
            raise FitError(f"{path}:{lineno}: 'val' must be an object of domain -> metrics")
        for name, metrics in row["val"].items():
            if domain is not None and name != domain:
                continue
            if not isinstance(metrics, dict) or metric not in metrics:
                raise FitError(f"{path}:{lineno}: val.{name} has no {metric!r}")
            if key not in row:
                raise FitError(f"{path}:{lineno}: validation line has no {key!r} (--compute {compute})")
            c = _number(row[key], f"{path}:{lineno}: {key}") * scale
            y = _number(metrics[metric], f"{path}:{lineno}: val.{name}.{metric}")
            points.setdefault(name, []).append((lineno, c, y))
    if not points:
        wanted = f"domain {domain!r}" if domain else "any domain"
        raise FitError(f"{path}: no validation lines with {metric!r} for {wanted}")
    out = []
    for name, rows in points.items():
        label = f"{prefix}/{name}" if prefix else name
        series = Series(label=label, lines=[r[0] for r in rows], compute=np.array([r[1] for r in rows]),
                        reward=np.array([r[2] for r in rows]))
        out.append(_check_increasing(series, path))
    return out


def load_csv(path: Path, *, compute_col: str, reward_cols: list[str]) -> list[Series]:
    """One series per reward column; empty cells are skipped (a column logged less often)."""
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        for col in [compute_col, *reward_cols]:
            if col not in header:
                raise FitError(f"{path}: no column {col!r}; columns are {', '.join(header)}")
        rows = [(lineno, row) for lineno, row in enumerate(reader, start=2)]
    out = []
    for col in reward_cols:
        keep = [(n, r) for n, r in rows if (r.get(col) or "").strip()]
        cs, ys = [], []
        for n, r in keep:
            cs.append(_parse(r.get(compute_col), f"{path}:{n}: {compute_col}"))
            ys.append(_parse(r[col], f"{path}:{n}: {col}"))
        series = Series(label=col, lines=[n for n, _ in keep], compute=np.array(cs), reward=np.array(ys))
        out.append(_check_increasing(series, path))
    return out


def _parse(text: str | None, where: str) -> float:
    try:
        value = float(text or "")
    except ValueError:
        raise FitError(f"{where}: {text!r} is not a number") from None
    return _number(value, where)
