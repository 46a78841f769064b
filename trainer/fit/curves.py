"""Per-domain validation curves of a run folder: data + sigmoid fit (`scalerl.trainer.fit.sigmoid`) as JSON,
and PNG plots.

`write_curves(run_dir, domains)` reads the validation lines of `metrics.jsonl` (the keys
`scalerl.trainer.fit.data` documents: `compute_device_s`, `compute_flops`, `val.<domain>.pass_rate`) and
writes `curves/<domain>.json` (points, and the fit or the reason there is none), `curves/pass_rate.png`
(raw held-out pass rate vs device-seconds, always) and `curves/fit.png` (data with fitted sigmoids,
when at least one fit succeeded). Compute is device-seconds; the warm start is not counted.

Non-guarantee: a few minutes of tiny-model training give poorly determined fits (A runs to its bound,
intervals are wide); the JSON carries the fit's intervals and warnings so nobody over-reads them.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


def write_curves(run_dir: Path, domains: list[str]) -> dict[str, Any]:
    from scalerl.trainer.fit.data import load_metrics
    from scalerl.trainer.fit.plot import PlotSeries, plot_fits
    from scalerl.trainer.fit.sigmoid import FitError, fit_sigmoid

    out = run_dir / "curves"
    out.mkdir(exist_ok=True)
    summary: dict[str, Any] = {}
    plotted, raw = [], []
    for domain in domains:
        try:
            (series,) = load_metrics(run_dir / "metrics.jsonl", domain=domain, compute="device_s", label_prefix="")
        except FitError as exc:
            summary[domain] = {"error": str(exc)}
            continue
        record: dict[str, Any] = {"compute_device_s": series.compute.tolist(), "pass_rate": series.reward.tolist()}
        raw.append((domain, series))
        try:
            fit = fit_sigmoid(series.compute, series.reward, a_max=1.0)  # a pass rate: A in [R0, 1]
            record["fit"] = fit.to_dict()
            plotted.append(PlotSeries(label=domain, compute=series.compute, reward=series.reward, fit=fit))
        except (FitError, ArithmeticError, np.linalg.LinAlgError) as exc:
            # A run's end must not die on a curve: the points are kept, the reason is recorded.
            record["fit_error"] = f"{type(exc).__name__}: {exc}"
        (out / f"{domain}.json").write_text(json.dumps(record, indent=2, default=float))
        summary[domain] = {k: v for k, v in record.items() if k in ("fit", "fit_error")}
    if raw:
        _plot_raw(raw, out / "pass_rate.png")
    if plotted:
        plot_fits(plotted, out / "fit.png", x_label="device-seconds (wall s x devices)", y_label="held-out pass rate",
                  y_lim=(0, 1))
    return summary


def _plot_raw(series: list, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 4.5), dpi=120, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for domain, s in series:
        ax.plot(s.compute, s.reward, marker="o", label=domain)
    ax.set_xlabel("device-seconds")
    ax.set_ylabel("held-out pass rate")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.savefig(path)
