"""Readers of a run folder for the dashboard: `metrics.jsonl` and `curves/<domain>.json`.

Guaranteed: nothing is written; a file is parsed again only when its size or modification time changed
(`JsonlCache`); every series a route returns has at most `MAX_POINTS` points (evenly thinned, the last
point kept, `Series.total` says how many there were), and a page gets at most `MAX_SERIES` series.
The fitted curve and its band are evaluated by the fit's own record,
`scalerl.env.contracts.sigmoid.SigmoidFit` (the one definition the trainer's fits use). Not guaranteed: a
half-written last line of a live run is skipped, not waited for; a run's files read at one moment may
disagree with each other (the trainer writes them one after another).
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scalerl.curriculum.strategy_config import BenchConfig, StageConfig
from scalerl.env.contracts.sigmoid import COMPUTE_AXES, SigmoidFit
from scalerl.env.dashboard import models as m

MAX_POINTS = 2000
MAX_SERIES = 64
STEP_KEYS = ("reward/mean", "effective_batch_fraction", "truncation_rate", "tokens_per_s")
STEP_PREFIXES = ("reward/", "format_failure_rate/")
CURRICULUM_PREFIXES = ("curriculum/", "draws/")
EXTRAPOLATE = 4.0  # the fitted curve is drawn to this multiple of the largest compute evaluated
HELDOUT_AXIS = "device_s"  # the held-out points and the run-end fits (`scalerl.trainer.fit.curves`) use this axis
HELDOUT_KEY, _, HELDOUT_X_LABEL = COMPUTE_AXES[HELDOUT_AXIS]


class JsonlCache:
    """The JSON-object lines of files, parsed once per (size, mtime) of each file. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[Path, tuple[tuple[int, int], list[dict[str, Any]]]] = {}

    def rows(self, path: Path) -> list[dict[str, Any]]:
        try:
            st = path.stat()
        except FileNotFoundError:
            return []
        key = (st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._seen.get(path)
            if hit is not None and hit[0] == key:
                return hit[1]
        rows = list(read_jsonl(path))
        with self._lock:
            self._seen[path] = (key, rows)
        return rows


def read_jsonl(path: Path):
    """Each complete JSON object line of `path` (a line that does not parse, e.g. a partial last line, is skipped)."""
    with path.open(encoding="utf-8") as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                yield row


def metric_rows(cache: JsonlCache, run: Path, kind: str) -> list[dict[str, Any]]:
    return [r for r in cache.rows(run / "metrics.jsonl") if r.get("kind") == kind]


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def thin(name: str, xs: list[float], ys: list[float | None], bound: int = MAX_POINTS) -> m.Series:
    """At most `bound` evenly spaced points of (xs, ys), always keeping the last one."""
    n = len(xs)
    if n > bound:
        idx = sorted({round(i * (n - 1) / (bound - 1)) for i in range(bound)})
        xs, ys = [xs[i] for i in idx], [ys[i] for i in idx]
    return m.Series(name=name, x=xs, y=ys, total=n)


def series(rows: list[dict[str, Any]], key: str, x_key: str = "step", name: str | None = None) -> m.Series:
    """`key` against `x_key` over the rows that have `x_key` (null where a row lacks `key`)."""
    xs, ys = [], []
    for r in rows:
        x = _num(r.get(x_key))
        if x is not None:
            xs.append(x)
            ys.append(_num(r.get(key)))
    return thin(name or key, xs, ys)


def heldout_series(rows: list[dict[str, Any]], domain: str, name: str | None = None) -> m.Series:
    """Held-out pass rate of `domain` against compute (HELDOUT_KEY), one point per validation line."""
    xs, ys = [], []
    for r in rows:
        x, val = _num(r.get(HELDOUT_KEY)), (r.get("val") or {}).get(domain)
        if x is not None and isinstance(val, dict):
            xs.append(x)
            ys.append(_num(val.get("pass_rate")))
    return thin(name or domain, xs, ys)


def numeric_keys(rows: list[dict[str, Any]], prefixes: tuple[str, ...]) -> list[str]:
    return sorted({k for r in rows for k, v in r.items() if k.startswith(prefixes) and _num(v) is not None})


def step_series(rows: list[dict[str, Any]]) -> list[m.Series]:
    """The Overview's per-step lines: reward (mean, per domain), effective batch, truncation, format
    failures per domain, throughput."""
    keys = list(STEP_KEYS) + [k for k in numeric_keys(rows, STEP_PREFIXES) if k not in STEP_KEYS]
    return [series(rows, k) for k in keys[:MAX_SERIES]]


def curriculum_series(rows: list[dict[str, Any]]) -> list[m.Series]:
    """Every curriculum key of the step lines (events, gauges: weights, skip probabilities, stage; draws
    per source) against step, at most MAX_SERIES of them."""
    return [series(rows, k) for k in numeric_keys(rows, CURRICULUM_PREFIXES)[:MAX_SERIES]]


def second_opinion_series(rows: list[dict[str, Any]]) -> list[m.Series]:
    """Per domain, the running false-negative estimate from the step lines' `second_opinion/<domain>/*`
    (the trainer's step keys, docs/train.md): the negatives the second judge accepted over those
    it re-checked, summed from the first step to each step (null until one was checked)."""
    found = {k.split("/")[1] for r in rows for k in r if k.startswith("second_opinion/") and k.endswith("/checked")}
    out = []
    for domain in sorted(found)[:MAX_SERIES]:
        xs, ys, checked, accepts = [], [], 0.0, 0.0
        for r in rows:
            x = _num(r.get("step"))
            if x is None:
                continue
            checked += _num(r.get(f"second_opinion/{domain}/checked")) or 0.0
            accepts += _num(r.get(f"second_opinion/{domain}/accepts")) or 0.0
            xs.append(x)
            ys.append(accepts / checked if checked else None)
        out.append(thin(domain, xs, ys))
    return out


def read_fit(path: Path) -> tuple[SigmoidFit | None, str | None]:
    """(the fit of a `curves/<domain>.json`, or None and why there is none)."""
    if not path.is_file():
        return None, "no fit yet (curves/ is written at the run's end)"
    try:
        rec = json.loads(path.read_text())
        if not rec.get("fit"):
            return None, rec.get("fit_error") or "no fit"
        return SigmoidFit.model_validate(rec["fit"]), None
    except (OSError, ValueError, AttributeError) as exc:  # pydantic's ValidationError is a ValueError
        return None, f"unreadable {path.name}: {exc}"


def pass_rate_range(values: list[float | None]) -> tuple[float, float]:
    """A pass-rate axis: 0 to the next tenth above the largest value drawn, never past 1 (a band or an
    extrapolated curve may run past 1; the axis does not follow it)."""
    top = max((v for v in values if v is not None and math.isfinite(v)), default=0.0)
    return 0.0, min(1.0, max(0.1, math.ceil(top * 10 - 1e-9) / 10))


def fit_grid(fit: SigmoidFit, n: int) -> np.ndarray:
    """Compute 0, then `n - 1` log-spaced points from a tenth of the first fitted compute to EXTRAPOLATE x the
    last: smooth on a linear and on a log compute axis."""
    lo, hi = fit.compute_range
    return np.concatenate([[0.0], np.geomspace(lo / 10, EXTRAPOLATE * hi, n - 1)])


def curve_set(cache: JsonlCache, run: Path, domain: str, grid: int = 80) -> m.CurveSet:
    """Held-out points from metrics.jsonl; the fit (curve to EXTRAPOLATE x the last compute, band, warnings)
    from curves/<domain>.json when the run has written it (at its end)."""
    points = heldout_series(metric_rows(cache, run, "validation"), domain)
    fit, error = read_fit(run / "curves" / f"{domain}.json")
    if fit is None:
        return m.CurveSet(domain=domain, points=points, fit_error=error, x_label=HELDOUT_X_LABEL,
                          y_range=pass_rate_range(points.y))
    cs = fit_grid(fit, grid)
    mid, (lo, hi) = fit.predict(cs), fit.band(cs)
    return m.CurveSet(domain=domain, points=points, fit=m.Series(name=f"{domain} fit", x=cs.tolist(), y=mid.tolist(),
                      total=grid), band_low=lo.tolist(), band_high=hi.tolist(), fit_max_compute=fit.compute_range[1],
                      asymptote=fit.A, warnings=fit.warnings, x_label=HELDOUT_X_LABEL,
                      y_range=pass_rate_range([*points.y, *mid.tolist(), *hi.tolist()]))


def run_settings(run: Path | None) -> m.RunSettings:
    """Samples per prompt and whether the run benches prompts, from its `config.yaml` (defaults when absent
    or unreadable: nothing known)."""
    if run is None:
        return m.RunSettings()
    try:
        cfg = yaml.safe_load((run / "config.yaml").read_text())
        pipeline, cur = (cfg.get("pipeline") or {}), (cfg.get("curriculum") or {})
        bench = BenchConfig.model_validate(cur.get("bench") or {}).active or any(
            StageConfig.model_validate(s).drop_above is not None for s in cur.get("stages") or [])
        return m.RunSettings(samples_per_prompt=pipeline.get("samples_per_prompt"), bench=bench)
    except (OSError, ValueError, AttributeError, yaml.YAMLError):  # pydantic's ValidationError is a ValueError
        return m.RunSettings()


def domains_of(cache: JsonlCache, run: Path) -> list[str]:
    found = {d for r in metric_rows(cache, run, "validation") for d in (r.get("val") or {})}
    if (run / "curves").is_dir():
        found |= {p.stem for p in (run / "curves").glob("*.json")}
    return sorted(found)


def overview(cache: JsonlCache, run: Path) -> m.Overview:
    steps = metric_rows(cache, run, "step")
    doms = domains_of(cache, run)
    return m.Overview(run=run.name, steps=len(steps), validations=len(metric_rows(cache, run, "validation")),
                      domains=doms, curves=[curve_set(cache, run, d) for d in doms], step_series=step_series(steps),
                      second_opinion=second_opinion_series(steps))


def compare_keys(cache: JsonlCache, runs: list[Path]) -> list[str]:
    """Keys every run has: held-out `val.<domain>` first, then numeric step keys."""
    common: set[str] | None = None
    for run in runs:
        keys = {f"val.{d}" for d in domains_of(cache, run)}
        keys |= {k for r in metric_rows(cache, run, "step") for k, v in r.items() if _num(v) is not None}
        common = keys if common is None else common & keys
    return sorted(common or (), key=lambda k: (not k.startswith("val."), k))[:500]


def compare(cache: JsonlCache, runs: list[Path], key: str) -> m.CompareView:
    """`key` of each run on one chart: `val.<domain>` against compute (HELDOUT_KEY), a step key against step."""
    names = [r.name if r.name not in [o.name for o in runs[:i]] else str(r) for i, r in enumerate(runs)]
    keys = compare_keys(cache, runs)
    if key.startswith("val."):
        out = [heldout_series(metric_rows(cache, r, "validation"), key[4:], name=n) for r, n in zip(runs, names)]
        return m.CompareView(runs=names, key=key, x=HELDOUT_KEY, x_label=HELDOUT_X_LABEL, series=out[:MAX_SERIES],
                             keys=keys, y_range=pass_rate_range([y for s in out for y in s.y]))
    out = [series(metric_rows(cache, r, "step"), key, name=n) for r, n in zip(runs, names)]
    return m.CompareView(runs=names, key=key, x="step", x_label="step", series=out[:MAX_SERIES], keys=keys)
