"""Figures of the study: pass rate against compute with the half-budget fits, and the fixed-A plot.

`plot_heldout`: one panel per domain, one colour per variant; every seed's points (filled inside the
fit window, hollow after it), its fitted curve (solid over the window, dashed to the budget) and the
fit's confidence band; the y-axis is pass rate on [0, 1]. `plot_fixed_a`: one panel per domain,
log F(R) = log((R - R0) / (A - R)) against log C for the runs refitted with the shared A; a sigmoid
with that A is a straight line there with slope B (points with R outside (R0, A) have no F(R) and are
left out). Uses matplotlib's Agg canvas directly (no pyplot, no global state).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scalerl.trainer.ablate.analysis import AnalysisResult
from scalerl.trainer.fit.data import COMPUTE_LABELS

COLORS = ("#222222", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _figure(n_panels: int):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0 * n_panels, 4.8), dpi=120, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(1, n_panels, squeeze=False)[0]


def _colors(result: AnalysisResult) -> dict[str, str]:
    names = list(dict.fromkeys(v.variant for v in result.report.variants))
    return {name: COLORS[i % len(COLORS)] for i, name in enumerate(names)}


def plot_heldout(result: AnalysisResult, path: Path) -> Path:
    rep = result.report
    domains = [d.domain for d in rep.domains]
    fig, axes = _figure(len(domains))
    colors = _colors(result)
    for ax, d in zip(axes, domains):
        for name, color in colors.items():
            row = next(v for v in rep.variants if v.variant == name and v.domain == d)
            label = name if row.A is None else f"{name}: A={row.A:.3f} B={row.B:.2f}"
            for i, c in enumerate(x for x in result.curves if x.variant == name and x.domain == d):
                inside = c.compute <= rep.fit_until
                ax.scatter(c.compute[inside], c.rate[inside], s=12, color=color, label=label if i == 0 else None)
                ax.scatter(c.compute[~inside], c.rate[~inside], s=12, facecolors="white", edgecolors=color)
                fit = result.fits.get((c.variant, c.seed, d))
                if fit is not None:
                    _draw_fit(ax, fit, color, rep.fit_until, max(rep.budget, float(c.compute.max())))
        ax.axvline(rep.fit_until, color="0.5", lw=0.8, ls="-.")
        ax.set(title=f"{d}: held-out pass rate", xlabel=COMPUTE_LABELS.get(rep.compute, rep.compute),
               ylabel="pass rate", ylim=(0, 1))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"fits on compute ≤ {rep.fit_until:.0f} (solid, filled points), extrapolated to the budget "
                 f"{rep.budget:g} (dashed, hollow points)", fontsize=9)
    fig.savefig(path)
    return path


def _draw_fit(ax, fit, color: str, fit_until: float, x_max: float) -> None:
    x_in = np.linspace(max(fit.compute_range[0] * 0.5, 1e-9), fit_until, 120)
    x_out = np.linspace(fit_until, x_max, 80)
    ax.plot(x_in, fit.predict(x_in), color=color, lw=1.2)
    ax.plot(x_out, fit.predict(x_out), color=color, lw=1.2, ls="--")
    xs = np.concatenate([x_in, x_out])
    lo, hi = fit.band(xs)
    ax.fill_between(xs, np.clip(lo, 0, 1), np.clip(hi, 0, 1), color=color, alpha=0.08, lw=0)


def plot_fixed_a(result: AnalysisResult, path: Path) -> Path | None:
    """log F(R) against log C for the fixed-A refits; None when no domain had one."""
    rep = result.report
    panels = [d for d in rep.domains if d.fixed_A is not None and d.R0 is not None]
    if not panels:
        return None
    fig, axes = _figure(len(panels))
    colors = _colors(result)
    for ax, d in zip(axes, panels):
        for (variant, seed, domain), fit in result.fixed_fits.items():
            if domain != d.domain:
                continue
            c = next(x for x in result.curves if (x.variant, x.seed, x.domain) == (variant, seed, domain))
            ok = (c.compute > 0) & (c.rate > d.R0) & (c.rate < d.fixed_A)
            f_r = np.log((c.rate[ok] - d.R0) / (d.fixed_A - c.rate[ok]))
            first = seed == min(s for (v, s, dd) in result.fixed_fits if v == variant and dd == domain)
            ax.scatter(np.log(c.compute[ok]), f_r, s=12, color=colors[variant],
                       label=f"{variant}: B={fit.B:.2f}" if first else None)
            xs = np.log(np.linspace(max(c.compute[c.compute > 0].min(), 1e-9), rep.budget, 50))
            ax.plot(xs, fit.B * (xs - np.log(fit.C_mid)), color=colors[variant], lw=1.0)
        ax.set(title=f"{d.domain}: A fixed at {d.fixed_A:.3f}, R0 = {d.R0:.3f}",
               xlabel="log compute (wall s x devices)", ylabel="log F(R) = log((R-R0)/(A-R)); slope = B")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.savefig(path)
    return path
