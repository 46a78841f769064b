"""`scalerl fit`: fit ScaleRL sigmoid curves to validation reward vs compute; print, JSON, plot.

Input is a run's metrics.jsonl (keys documented in `scalerl.trainer.fit.data`) or any CSV. One fit per
series (per domain, per run, per reward column); series overlay in one `--plot`. Heavy imports
(numpy, scipy, matplotlib) happen inside the command.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import typer

logger = logging.getLogger(__name__)

HELP = """Fit R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) to validation reward vs compute.

Examples:

  scalerl fit --metrics runs/r1/metrics.jsonl --domain math --burn-in 1500 --predict-at 16000 --plot fit.png

  scalerl fit --csv curve.csv --compute-col gpu_hours --reward-col pass_rate --fit-until 8000 --json
"""


def _floats(values: list[str]) -> list[float]:
    """Accept `--predict-at 8000 --predict-at 16000` and `--predict-at 8000,16000`."""
    out = []
    for v in values:
        for part in v.split(","):
            if part.strip():
                try:
                    out.append(float(part))
                except ValueError:
                    raise typer.BadParameter(f"{part!r} is not a number", param_hint="--predict-at") from None
    return out


def _load(metrics, domain, compute, metric, csv_file, compute_col, reward_cols):
    from scalerl.trainer.fit.data import load_csv, load_metrics

    if bool(metrics) == bool(csv_file):
        raise typer.BadParameter("give either --metrics (one or more) or --csv", param_hint="--metrics/--csv")
    if csv_file is not None:
        if not compute_col or not reward_cols:
            raise typer.BadParameter("--csv needs --compute-col and --reward-col", param_hint="--csv")
        return load_csv(csv_file, compute_col=compute_col, reward_cols=reward_cols)
    prefix = None if len(metrics) > 1 else ""
    return [s for p in metrics for s in load_metrics(p, domain=domain, compute=compute, metric=metric,
                                                     label_prefix=prefix)]


def _describe(label: str, fit, preds: list[dict], power_law) -> str:
    lines = [(f"{label}  ({fit.method} fit, {fit.n_points} points, compute {fit.compute_range[0]:g}"
             f"-{fit.compute_range[1]:g}, residual sd {fit.sigma:.4f})")]
    pct = round(fit.level * 100)
    for name in ("A", "B", "C_mid", "R0"):
        value, (lo, hi) = getattr(fit, name), fit.intervals[name]
        note = "  (fixed)" if name in fit.fixed else f"  [{lo:.4g}, {hi:.4g}] {pct} %"
        lines.append(f"  {name:<5} = {value:.4g}{note}")
    for p in preds:
        lines.append(f"  R({p['compute']:g}) = {p['reward']:.4f}  [{p['lo']:.4f}, {p['hi']:.4f}] {pct} %"
                     + (f"  power law: {p['power_law']:.4f}" if "power_law" in p else ""))
    if power_law is not None:
        lines.append(f"  power law: R = {power_law.R0:.4f} + {power_law.k:.4g} C^{power_law.alpha:.3f}")
    lines.extend(f"  warning: {w}" for w in fit.warnings)
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    """Add the `fit` command to `app`."""

    @app.command("fit", help=HELP)
    def fit(
        metrics: list[Path] = typer.Option([], "--metrics", help="RUN/metrics.jsonl; repeat to overlay runs"),
        domain: str | None = typer.Option(None, help="fit only this validation domain (default: all)"),
        compute: str = typer.Option(
            "device_hours", "--compute", "--x",
            help="compute axis: device_hours | device_s | samples | tokens | flops"),
        metric: str = typer.Option("pass_rate", help="key under val.<domain> to fit"),
        csv_file: Path | None = typer.Option(None, "--csv", help="CSV file instead of metrics.jsonl"),
        compute_col: str | None = typer.Option(None, "--compute-col", help="CSV compute column"),
        reward_cols: list[str] = typer.Option([], "--reward-col", help="CSV reward column; repeat to overlay"),
        r0: float | None = typer.Option(None, "--r0", help="fix R0 (default: fitted; compute-0 rows pin it)"),
        burn_in: float | None = typer.Option(None, "--burn-in", help="drop points with 0 < C < this"),
        fit_until: float | None = typer.Option(None, "--fit-until", help="fit only C <= this"),
        predict_at: list[str] = typer.Option([], "--predict-at", help="compute to predict at (repeat or a,b)"),
        method: str = typer.Option("default", help="default | paper (the paper's grid search, slow)"),
        fixed_a: float | None = typer.Option(None, "--fixed-a", help="hold A at this value, refit B"),
        power_law: bool = typer.Option(False, "--power-law", help="also fit R0 + k C^alpha"),
        level: float = typer.Option(0.9, help="interval level"),
        plot: Path | None = typer.Option(None, help="write a figure (PNG/PDF/SVG by suffix)"),
        as_json: bool = typer.Option(False, "--json", help="print a JSON object instead of text"),
    ) -> None:
        from scalerl.trainer.fit.data import COMPUTE_LABELS
        from scalerl.trainer.fit.sigmoid import FitError

        compute = compute.replace("-", "_")
        if compute not in COMPUTE_LABELS:
            raise typer.BadParameter(f"must be one of {', '.join(COMPUTE_LABELS)}", param_hint="--compute")
        if method not in ("default", "paper"):
            raise typer.BadParameter("must be default or paper", param_hint="--method")
        # a pass rate from metrics.jsonl is bounded: A in [R0, 1] as in the paper, y-axis [0, 1]
        pass_rate = bool(metrics) and metric.endswith("pass_rate")
        try:
            series = _load(metrics, domain, compute, metric, csv_file, compute_col, reward_cols)
        except (FitError, OSError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        results = []
        for s in series:  # one series that cannot be fitted (a flat domain) does not hide the others
            try:
                results.append(_fit_one(s, r0=r0, burn_in=burn_in, fit_until=fit_until, method=method,
                                        fixed_a=fixed_a, power_law=power_law, level=level,
                                        predict_at=_floats(predict_at), a_max=1.0 if pass_rate else None))
            except FitError as exc:
                typer.echo(f"error: {exc}", err=True)
        if not results:
            raise typer.Exit(2)
        _emit(results, as_json)
        if plot is not None:
            from scalerl.trainer.fit.data import COMPUTE_LABELS

            x_label = compute_col if csv_file is not None else COMPUTE_LABELS[compute]
            _plot(results, plot, x_label, predict_at=_floats(predict_at), y_lim=(0.0, 1.0) if pass_rate else None)
            if not as_json:
                typer.echo(f"figure written to {plot}")


def _fit_one(s, *, r0, burn_in, fit_until, method, fixed_a, power_law, level, predict_at, a_max=None) -> dict:
    from scalerl.trainer.fit.sigmoid import FitError, fit_fixed_A, fit_power_law, fit_sigmoid

    try:
        if fixed_a is not None:
            f = fit_fixed_A(s.compute, s.reward, A=fixed_a, r0=r0, burn_in=burn_in, fit_until=fit_until,
                            level=level)
        else:
            f = fit_sigmoid(s.compute, s.reward, r0=r0, burn_in=burn_in, fit_until=fit_until,
                            method=method, level=level, a_max=a_max)
        pl = fit_power_law(s.compute, s.reward, r0=r0, burn_in=burn_in, fit_until=fit_until) if power_law else None
    except FitError as exc:
        raise FitError(f"{s.label}: {exc}") from None
    preds = []
    for x in predict_at:
        lo, hi = f.band(x)
        preds.append({"compute": x, "reward": f.predict(x), "lo": lo, "hi": hi}
                     | ({"power_law": pl.predict(x)} if pl is not None else {}))
    return {"series": s, "fit": f, "power_law": pl, "predictions": preds}


def _emit(results: list[dict], as_json: bool) -> None:
    if not as_json:
        typer.echo("\n\n".join(_describe(r["series"].label, r["fit"], r["predictions"], r["power_law"])
                               for r in results))
        return
    objs = {}
    for r in results:
        obj = {"series": r["series"].label} | r["fit"].to_dict() | {"predictions": r["predictions"]}
        if r["power_law"] is not None:
            obj["power_law"] = r["power_law"].to_dict()
        objs[r["series"].label] = obj
    payload = next(iter(objs.values())) if len(objs) == 1 else {"fits": objs}
    typer.echo(json.dumps(payload, indent=2))


def _plot(results: list[dict], out: Path, x_label: str, predict_at: list[float],
          y_lim: tuple[float, float] | None = None) -> None:
    from scalerl.trainer.fit.plot import PlotSeries, plot_fits

    series = [PlotSeries(label=r["series"].label, compute=r["series"].compute, reward=r["series"].reward,
                         fit=r["fit"], power_law=r["power_law"], predict_at=predict_at) for r in results]
    plot_fits(series, out, x_label=x_label, y_lim=y_lim)
