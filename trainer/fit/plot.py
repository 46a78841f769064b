"""Report figure for sigmoid fits: data, fitted curve, extrapolation, confidence band and A line.

Several series (runs or domains) overlay in one figure, one colour each. Points the fit used are
filled; points outside the fit window (burn-in, held out after ``fit_until``) are hollow, so a
reader sees at once what was extrapolated. The curve is solid over the fitted compute range and
dashed beyond it; the shaded band is the fit's confidence band for the curve (the fit's level,
90 % by default); the dotted horizontal line is A. An optional power-law fit is drawn thin and
dotted. Uses matplotlib's Agg canvas directly (no pyplot, no display, no global state).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict
from scalerl.env.contracts.sigmoid import SigmoidFit
from scalerl.trainer.fit.model import PowerLawFit

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


class PlotSeries(BaseModel):
    """One overlaid series: its data, its sigmoid fit and optionally a power-law fit."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    label: str
    compute: np.ndarray
    reward: np.ndarray
    fit: SigmoidFit
    power_law: PowerLawFit | None = None
    predict_at: list[float] = []


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _legend_label(s: PlotSeries) -> str:
    f = s.fit
    lo, hi = f.intervals["A"]
    a_text = f"A={f.A:.3f}" if "A" in f.fixed else f"A={f.A:.3f} [{lo:.3f}, {hi:.3f}]"
    return f"{s.label}: {a_text}, B={f.B:.2f}, C_mid={_fmt(f.C_mid)}"


def _draw_series(ax, s: PlotSeries, color: str, x_max: float) -> None:
    f = s.fit
    c, y = np.asarray(s.compute, float), np.asarray(s.reward, float)
    lo_c, hi_c = f.compute_range
    used = (c == 0) | ((c >= lo_c) & (c <= hi_c)) if "R0" not in f.fixed else (c >= lo_c) & (c <= hi_c)
    ax.scatter(c[used], y[used], s=16, color=color, zorder=3, linewidths=0)
    if (~used).any():
        ax.scatter(c[~used], y[~used], s=16, facecolors="white", edgecolors=color, linewidths=0.9, zorder=3)
    x_fit = np.linspace(max(min(c.min(), lo_c), 0.0), hi_c, 300)
    x_ext = np.linspace(hi_c, x_max, 200)
    x_all = np.concatenate([x_fit, x_ext])
    band_lo, band_hi = f.band(x_all)
    ax.fill_between(x_all, band_lo, band_hi, color=color, alpha=0.15, linewidth=0)
    ax.plot(x_fit, f.predict(x_fit), color=color, lw=1.8, label=_legend_label(s))
    if x_max > hi_c * 1.001:
        ax.plot(x_ext, f.predict(x_ext), color=color, lw=1.8, ls="--")
    ax.axhline(f.A, color=color, lw=0.9, ls=":", alpha=0.9)
    if s.power_law is not None:
        ax.plot(x_all, s.power_law.predict(x_all), color=color, lw=1.0, ls=(0, (1, 1.5)), alpha=0.8,
                label=f"{s.label}: power law (alpha={s.power_law.alpha:.2f})")
    for x in s.predict_at:
        lo, hi = f.band(x)
        ax.errorbar([x], [f.predict(x)], yerr=[[f.predict(x) - lo], [hi - f.predict(x)]], fmt="D",
                    ms=4.5, color=color, capsize=3, lw=1.0, zorder=4)


def _style_key() -> list:
    """Grey proxy entries explaining marker and line styles shared by every series."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    grey = "0.45"
    return [
        Line2D([], [], ls="", marker="o", ms=4, color=grey, label="points fitted"),
        Line2D([], [], ls="", marker="o", ms=4, mfc="white", mec=grey, label="points not fitted"),
        Line2D([], [], ls="--", color=grey, label="extrapolation"),
        Line2D([], [], ls=":", color=grey, label="asymptote A"),
        Patch(color=grey, alpha=0.2, label="confidence band"),
    ]


def plot_fits(
    fits_and_data: list[PlotSeries],
    out: Path,
    *,
    title: str | None = None,
    x_label: str = "compute",
    y_label: str = "validation pass rate",
    extend_to: float | None = None,
    y_lim: tuple[float, float] | None = None,
) -> Path:
    """Draw every series into one PNG (or any matplotlib format by suffix) at `out`; returns `out`.

    `y_lim` fixes the y-axis ((0, 1) for pass rates, so a poorly determined A cannot squash the data)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    if not fits_and_data:
        raise ValueError("plot_fits needs at least one series")
    x_max = max(max(float(np.max(s.compute)), *s.predict_at, 0.0) for s in fits_and_data)
    x_max = max(x_max, extend_to or 0.0)
    fig = Figure(figsize=(8.0, 5.0), dpi=150, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for k, s in enumerate(fits_and_data):
        _draw_series(ax, s, COLORS[k % len(COLORS)], x_max)
    ends = {s.fit.compute_range[1] for s in fits_and_data}
    if len(ends) == 1 and (end := ends.pop()) < x_max * 0.999:
        ax.axvline(end, color="0.55", lw=0.8, ls="-.", zorder=1)
        ax.annotate("fit window ends", (end, 0.02), xycoords=("data", "axes fraction"), va="bottom",
                    xytext=(4, 0), textcoords="offset points", fontsize=8, color="0.4")
    ax.set_xlim(0, x_max * 1.02)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}" if x_max >= 100 else f"{v:g}"))
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    if y_lim is not None:
        ax.set_ylim(*y_lim)
    ax.grid(True, alpha=0.3, lw=0.6)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    level = round(fits_and_data[0].fit.level * 100)
    ax.set_title(title or f"Sigmoid fit $R(C) = R_0 + (A - R_0)\\,/\\,(1 + (C_{{mid}}/C)^B)$"
                 f" with {level} % confidence band", fontsize=10)
    ax.legend(loc="upper left", fontsize=8, frameon=True, framealpha=0.9, edgecolor="0.85")
    fig.legend(handles=_style_key(), loc="outside lower center", ncol=5, fontsize=8, frameon=False)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out
