"""Sigmoid fit accuracy and speed: the default fit vs the paper's grid method on the same curves.

Workload: the synthetic protocol of `trainer/fit/synthetic.py` (every published Table 1 row with
A, B and C_mid; R0 = 0.30; 61 evaluations up to the row's run length; noise sigma 0.01), --trials
seeded noise draws per row. Each curve is fitted twice per method, on all points and on the first
half of the compute (the paper's fit-to-8k, extrapolate-to-16k protocol), with R0 given to both
methods (the paper fixes R0; giving it to both keeps the comparison fair). A third line reports the
default with R0 fitted (its normal mode). Methods alternate on each curve so machine noise hits
both alike; times are per fit, including the default's intervals.

Reported: mean and max |A - A_true| and mean relative B and C_mid errors (full data), mean
|R(C_end) - R_true(C_end)| from the first-half fit, mean and median time per fit, and the speed ratio paper / default.
Targets: default at least as accurate (mean |A - A_true|) and >= 10x faster. Exit status 1 if not.

    .venv/bin/python benchmarks/bench_fit.py             # 10 rows x 3 trials (~3 min on 2 cores)
    .venv/bin/python benchmarks/bench_fit.py --sigma 0   # noiseless curves: grid resolution alone
    .venv/bin/python benchmarks/bench_fit.py --trials 10 --json bench_fit.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
from scalerl.trainer.fit.sigmoid import fit_sigmoid
from scalerl.trainer.fit.synthetic import NOISE_SIGMA, published_curves, trial_rng

TARGET_SPEEDUP = 10.0
TIE_TOL = 1e-6
"""Errors closer than this count as equal (both methods recover noiseless A to ~1e-10)."""
VARIANTS = {"default": ("default", True), "paper": ("paper", True), "default, R0 fitted": ("default", False)}


def _timed_fit(c, y, method: str, r0, fit_until=None):
    t0 = time.perf_counter()
    f = fit_sigmoid(c, y, method=method, r0=r0, fit_until=fit_until)
    return f, time.perf_counter() - t0


def run(trials: int, seed: int, sigma: float) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    rec = {name: {"a_err": [], "b_rel": [], "cmid_rel": [], "pred_err": [], "time_s": []} for name in VARIANTS}
    for row, spec in enumerate(published_curves()):
        for k in range(trials):
            c, y = spec.sample(trial_rng(seed, row, k), sigma=sigma)
            truth_end = float(spec.truth(c[-1:])[0])
            order = list(VARIANTS) if (row + k) % 2 == 0 else list(reversed(VARIANTS))
            for name in order:
                method, give_r0 = VARIANTS[name]
                r0 = spec.R0 if give_r0 else None
                full, t_full = _timed_fit(c, y, method, r0)
                half, t_half = _timed_fit(c, y, method, r0, fit_until=spec.C_end / 2)
                rec[name]["a_err"].append(abs(full.A - spec.A))
                rec[name]["b_rel"].append(abs(full.B / spec.B - 1))
                rec[name]["cmid_rel"].append(abs(full.C_mid / spec.C_mid - 1))
                rec[name]["pred_err"].append(abs(half.predict(c[-1]) - truth_end))
                rec[name]["time_s"] += [t_full, t_half]
        print(f"  {spec.name}: done", flush=True)
    paired = np.asarray(rec["paper"]["a_err"]) - np.asarray(rec["default"]["a_err"])
    pairs = {"mean_paper_minus_default": float(paired.mean()),
             "se": float(paired.std(ddof=1) / np.sqrt(paired.size)),
             "default_not_worse_fraction": float(np.mean(paired >= -TIE_TOL))}
    return {
        name: {
            "mean_abs_A_err": float(np.mean(r["a_err"])),
            "max_abs_A_err": float(np.max(r["a_err"])),
            "mean_rel_B_err": float(np.mean(r["b_rel"])),
            "mean_rel_C_mid_err": float(np.mean(r["cmid_rel"])),
            "mean_abs_pred_err": float(np.mean(r["pred_err"])),
            "mean_time_s": float(np.mean(r["time_s"])),
            "median_time_s": float(statistics.median(r["time_s"])),
            "fits": len(r["time_s"]),
        }
        for name, r in rec.items()
    }, pairs


def example_figure(out: Path, seed: int) -> Path:
    """The paper's math+code run, 16k GPU-hours, fitted up to 8k and extrapolated, with power laws."""
    from scalerl.trainer.fit.plot import PlotSeries, plot_fits
    from scalerl.trainer.fit.sigmoid import fit_power_law

    specs = [s for s in published_curves() if "math+code" in s.name]
    series = []
    for row, spec in enumerate(specs):
        c = np.concatenate([[0.0], np.linspace(16000 / 60, 16000, 60)])
        y = spec.truth(c) + trial_rng(seed, 100 + row, 0).normal(0, NOISE_SIGMA, c.size)
        label = spec.name.split(": ")[-1].replace(" curve", "")
        series.append(PlotSeries(label=label, compute=c, reward=y, fit=fit_sigmoid(c, y, fit_until=8000),
                                 power_law=fit_power_law(c, y, fit_until=8000), predict_at=[16000.0]))
    return plot_fits(series, out, x_label="compute (GPU-hours)",
                     title="Synthetic math+code run (paper Table 1 parameters, noise 0.01): fit to 8k, "
                           "extrapolate to 16k")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3, help="noise draws per published row")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sigma", type=float, default=NOISE_SIGMA, help="noise sd on each evaluation")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--figure", type=Path, default=None,
                    help="also draw the docs example figure (math+code rows, first-half fits) here")
    args = ap.parse_args()
    if args.figure:
        print(f"example figure: {example_figure(args.figure, args.seed)}")
    fit_sigmoid(*published_curves()[0].sample(trial_rng(1, 0, 0)))  # warm imports before timing
    res, pairs = run(args.trials, args.seed, args.sigma)
    print("\n| method | mean abs(A-A_true) | max abs(A-A_true) | mean rel. B err | mean rel. C_mid err | "
          "mean abs(pred-true) at C_end, first-half fit | mean time/fit | median time/fit |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in res.items():
        print(f"| {name} | {r['mean_abs_A_err']:.4f} | {r['max_abs_A_err']:.4f} | "
              f"{100 * r['mean_rel_B_err']:.1f} % | {100 * r['mean_rel_C_mid_err']:.1f} % | "
              f"{r['mean_abs_pred_err']:.4f} | {1e3 * r['mean_time_s']:.1f} ms | "
              f"{1e3 * r['median_time_s']:.1f} ms |")
    speedup = res["paper"]["mean_time_s"] / res["default"]["mean_time_s"]
    accurate = res["default"]["mean_abs_A_err"] <= res["paper"]["mean_abs_A_err"] + TIE_TOL
    print(f"\nspeed ratio paper/default (mean time per fit): {speedup:.0f}x (target >= {TARGET_SPEEDUP:.0f}x)")
    print(f"default at least as accurate in A: {accurate} "
          f"({res['default']['mean_abs_A_err']:.4f} vs {res['paper']['mean_abs_A_err']:.4f})")
    print(f"paired |A err| paper - default: {pairs['mean_paper_minus_default']:+.5f} "
          f"(se {pairs['se']:.5f}); default not worse in {100 * pairs['default_not_worse_fraction']:.0f} % of curves")
    if args.json:
        args.json.write_text(json.dumps({"results": res, "paired": pairs, "speedup": speedup,
                                         "trials": args.trials, "sigma": args.sigma}, indent=2))
    return 0 if accurate and speedup >= TARGET_SPEEDUP else 1


if __name__ == "__main__":
    raise SystemExit(main())
