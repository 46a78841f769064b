"""Fits of the study: per variant x domain x seed, the baseline's margin on A, the fixed-A refit.

Method (arXiv 2510.13786, §4 and Appendix A.5-A.7), on each run's held-out pass rate against compute
on the study's compute axis (`--compute`: `compute_device_s`, wall seconds x devices in use, the
paper's GPU-hours in seconds; or `compute_samples`, `compute_tokens`, `compute_flops`, which do not
follow the machine's load, `scalerl.trainer.run.compute`):
- R0 is handled one way for every run: fixed at the mean pass rate of the compute-0 evaluations of
  all runs (every run starts from the same cached policy and held-out set), so B and C_mid of
  different runs are measured from the same start; fitted only when no run has a compute-0 point.
- The sigmoid is fitted on points with compute <= `fit_fraction` x budget (after the burn-in), with A
  bounded to [R0, 1] (pass rates), and scored on the later points: `extrapolation_error` is the
  prediction minus the observation at the last evaluation (the budget), `extrapolation_mae` the mean
  absolute error over all points beyond the fit window.
- The margin on A per domain is half the range of the baseline seeds' A, at least the paper's 0.02
  (its margin from three runs); with fewer than two baseline fits it is 0.02, and the report says so.
  A variant's A is flagged when |mean A - baseline mean A| exceeds the margin.
- Fixed-A refit: the variants (baseline included) whose mean A lies within the margin of the
  baseline's get A fixed to the mean of their mean A's, and every one of their runs is refitted for
  B and C_mid (R0 fixed as above): with equal A, B alone says which recipe is more efficient.
Guarantees: a fit that fails is recorded with its reason and never ends the analysis; every number in
the report comes from the run folders, nothing is cached. Not guaranteed: that short runs determine A
(the intervals say how well they do); the standard error of a point is the binomial one over the
held-out samples (an upper bound for a fixed held-out set; prompts are not resampled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import Field
from scalerl.env.contracts.records import Strict
from scalerl.trainer.ablate.resolution import Resolution, baseline_resolution, compute_to_target, difference_se
from scalerl.trainer.ablate.study import Manifest
from scalerl.trainer.ablate.variants import BASELINE

PAPER_MARGIN = 0.02
"""The paper's ±0.02 on A (three runs of the same recipe); the floor of the margin here."""
A_BOUND = 1.0
"""Pass rates: A is bounded to [R0, 1]."""
POINT_SE_TARGET = 0.01
"""A point resolves ±0.02 (about two standard errors) when its standard error is at most this."""


@dataclass
class Curve:
    """Held-out pass rate of one run and domain: compute, rate and samples per evaluation."""

    variant: str
    seed: int
    domain: str
    compute: np.ndarray
    rate: np.ndarray
    n: np.ndarray


class RunFit(Strict):
    variant: str
    seed: int
    domain: str
    n_points: int
    final_pass_rate: float | None = None
    late_pass_rate: float | None = Field(
        default=None, description="mean of the evaluations in the last third of the budget (less noisy than the last)")
    fit: dict | None = Field(default=None, description="SigmoidFit.to_dict() of the half-budget fit")
    error: str | None = None
    extrapolation_error: float | None = None
    extrapolation_mae: float | None = None
    fixed_A_fit: dict | None = None
    fixed_A_error: str | None = None
    compute_to_target: float | None = Field(
        default=None, description="compute to the domain's target pass rate (first crossing); None if never")


class VariantDomain(Strict):
    variant: str
    domain: str
    seeds: int
    seeds_fitted: int
    A: float | None = None
    A_spread: float | None = Field(default=None, description="half the range over seeds")
    A_at_bound: int = Field(default=0, description="seeds whose A sits at its bound 1: A undetermined")
    B: float | None = None
    B_spread: float | None = None
    C_mid: float | None = None
    dA: float | None = None
    dB: float | None = None
    beyond_margin: bool | None = None
    B_fixed: float | None = None
    dB_fixed: float | None = None
    extrapolation_error: float | None = None
    final_pass_rate: float | None = None
    final_pass_rate_spread: float | None = None
    late_pass_rate: float | None = None
    late_pass_rate_spread: float | None = None
    d_late_pass_rate: float | None = Field(default=None, description="late pass rate minus the baseline's")
    d_late_pass_rate_se: float | None = Field(default=None, description="standard error of d_late_pass_rate")
    dA_se: float | None = Field(default=None, description="standard error of dA")
    reached_target: int = Field(default=0, description="seeds that reached the domain's target pass rate")
    compute_to_target: float | None = Field(default=None, description="mean over the seeds, when all reached it")
    d_compute_to_target: float | None = None
    d_compute_to_target_se: float | None = None


class DomainSummary(Strict):
    domain: str
    R0: float | None
    R0_sd: float | None = Field(
        default=None, description="standard deviation of the compute-0 evaluations across runs: every run "
        "evaluates the same starting policy there, so this is the measured noise of one evaluation")
    R0_runs: int = 0
    margin: float
    margin_source: str
    fixed_A: float | None = None
    fixed_A_variants: list[str] = Field(default_factory=list)
    resolution: Resolution | None = Field(default=None, description="the smallest differences the planned "
                                          "seeds resolve at 2 standard errors, from the baseline's seeds")
    samples_per_point: int
    max_point_se: float = Field(description="largest binomial standard error of one evaluation")
    samples_for_margin: int = Field(
        description="samples per evaluation that would bring that error to POINT_SE_TARGET at the observed rates")


class Analysis(Strict):
    budget: float
    compute: str = Field(description="the compute axis of the budget and the fits")
    fit_until: float
    burn_in: float | None
    domains: list[DomainSummary]
    variants: list[VariantDomain]
    runs: list[RunFit]


@dataclass
class AnalysisResult:
    report: Analysis
    curves: list[Curve]
    fits: dict[tuple[str, int, str], object] = field(default_factory=dict)
    fixed_fits: dict[tuple[str, int, str], object] = field(default_factory=dict)


def load_curves(folder: Path, variant: str, seed: int, domains: list[str], axis: str = "device_s") -> list[Curve]:
    """The validation points of one run folder, per domain, in step order, against `compute_<axis>`."""
    from scalerl.trainer.run.log import read_metrics

    rows = read_metrics(folder / "metrics.jsonl", "validation")
    out = []
    for d in domains:
        key = f"compute_{axis}"
        pts = [(r[key], r["val"][d]["pass_rate"], r["val"][d].get("n", 0)) for r in rows
               if d in r.get("val", {}) and r.get(key) is not None]
        keep, last = [], -1.0
        for p in pts:  # a repeated evaluation at the same compute adds nothing to a fit
            if p[0] > last:
                keep.append(p)
                last = p[0]
        arr = np.array(keep, dtype=float).reshape(-1, 3)
        out.append(Curve(variant, seed, d, arr[:, 0], arr[:, 1], arr[:, 2]))
    return out


def start_rates(curves: list[Curve], domain: str) -> list[float]:
    """The compute-0 evaluations of `domain`, one per run that has one."""
    return [float(c.rate[0]) for c in curves if c.domain == domain and c.compute.size and c.compute[0] == 0]


def shared_r0(curves: list[Curve], domain: str) -> float | None:
    starts = start_rates(curves, domain)
    return float(np.mean(starts)) if starts else None


def fit_run(curve: Curve, r0: float | None, fit_until: float, burn_in: float | None,
            late_from: float = math.inf) -> tuple[RunFit, object]:
    """The half-budget fit of one curve, scored on the points after the fit window."""
    from scalerl.trainer.fit.sigmoid import fit_sigmoid

    late = curve.rate[curve.compute >= late_from]
    rec = RunFit(variant=curve.variant, seed=curve.seed, domain=curve.domain, n_points=int(curve.compute.size),
                 final_pass_rate=float(curve.rate[-1]) if curve.rate.size else None,
                 late_pass_rate=float(late.mean()) if late.size else None)
    try:
        fit = fit_sigmoid(curve.compute, curve.rate, r0=r0, burn_in=burn_in, fit_until=fit_until, a_max=A_BOUND)
    except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:  # FitError is a ValueError
        rec.error = f"{type(exc).__name__}: {exc}"
        return rec, None
    rec.fit = fit.to_dict()
    later = curve.compute > fit_until
    if later.any():
        err = np.asarray(fit.predict(curve.compute[later])) - curve.rate[later]
        rec.extrapolation_error, rec.extrapolation_mae = float(err[-1]), float(np.mean(np.abs(err)))
    return rec, fit


def margin_for(baseline_as: list[float]) -> tuple[float, str]:
    if len(baseline_as) < 2:
        return PAPER_MARGIN, f"the paper's ±{PAPER_MARGIN} (fewer than 2 baseline fits)"
    half = (max(baseline_as) - min(baseline_as)) / 2
    source = f"half the range of {len(baseline_as)} baseline seeds' A ({half:.3f})"
    return max(half, PAPER_MARGIN), source + (f", raised to the paper's {PAPER_MARGIN}" if half < PAPER_MARGIN else "")


def _mean_spread(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return float(np.mean(values)), (float(max(values) - min(values)) / 2 if len(values) > 1 else None)


def summarize_variant(variant: str, domain: str, runs: list[RunFit], n_seeds: int, base: VariantDomain | None,
                      margin: float) -> VariantDomain:
    fitted = [r.fit for r in runs if r.fit is not None]
    a, a_spread = _mean_spread([f["A"] for f in fitted])
    b, b_spread = _mean_spread([f["B"] for f in fitted])
    c_mid, _ = _mean_spread([f["C_mid"] for f in fitted])
    final, final_spread = _mean_spread([r.final_pass_rate for r in runs if r.final_pass_rate is not None])
    late, late_spread = _mean_spread([r.late_pass_rate for r in runs if r.late_pass_rate is not None])
    extrap, _ = _mean_spread([r.extrapolation_error for r in runs if r.extrapolation_error is not None])
    vd = VariantDomain(variant=variant, domain=domain, seeds=n_seeds, seeds_fitted=len(fitted), A=a,
                       A_spread=a_spread, B=b, B_spread=b_spread, C_mid=c_mid, extrapolation_error=extrap,
                       final_pass_rate=final, final_pass_rate_spread=final_spread, late_pass_rate=late,
                       late_pass_rate_spread=late_spread,
                       A_at_bound=sum(f["A"] >= A_BOUND - 1e-6 for f in fitted))
    if base is not None and base.A is not None and a is not None:
        vd.dA, vd.dB = a - base.A, (b - base.B) if b is not None and base.B is not None else None
        vd.beyond_margin = abs(vd.dA) > margin
    if base is not None and base.late_pass_rate is not None and late is not None:
        vd.d_late_pass_rate = late - base.late_pass_rate
    return vd


def _paired(runs: list[RunFit], base_runs: list[RunFit], value) -> tuple[float | None, float | None]:
    """Mean difference of `value` over the runs against the baseline's runs, and its standard error."""
    vs = [x for x in map(value, runs) if x is not None]
    bs = [x for x in map(value, base_runs) if x is not None]
    if not vs or not bs:
        return None, None
    return float(np.mean(vs) - np.mean(bs)), difference_se(vs, bs)


def compare_to_baseline(rows: list[VariantDomain], runs_d: list[RunFit], curves: list[Curve],
                        target: float | None) -> None:
    """Per variant of one domain (`runs_d`, `curves`): compute to the target pass rate, and each difference
    from the baseline with its standard error."""
    if target is not None:
        by_run = {(c.variant, c.seed): c for c in curves}
        for rec in runs_d:
            if (c := by_run.get((rec.variant, rec.seed))) is not None:
                rec.compute_to_target = compute_to_target(c.compute, c.rate, target)
    base_runs = [r for r in runs_d if r.variant == BASELINE]
    base_reached = bool(base_runs) and all(r.compute_to_target is not None for r in base_runs)
    for row in rows:
        runs = [r for r in runs_d if r.variant == row.variant]
        reach = [r.compute_to_target for r in runs if r.compute_to_target is not None]
        row.reached_target = len(reach)
        row.compute_to_target = float(np.mean(reach)) if reach and len(reach) == len(runs) else None
        if row.variant == BASELINE:
            continue
        row.d_late_pass_rate_se = _paired(runs, base_runs, lambda r: r.late_pass_rate)[1]
        row.dA_se = _paired(runs, base_runs, lambda r: r.fit["A"] if r.fit else None)[1]
        if row.compute_to_target is not None and base_reached:
            row.d_compute_to_target, row.d_compute_to_target_se = _paired(
                runs, base_runs, lambda r: r.compute_to_target)


def domain_resolution(result: AnalysisResult, domain: str, r0: float | None, seeds: int,
                      samples: int) -> Resolution:
    """`scalerl.trainer.ablate.resolution.baseline_resolution` over the baseline's runs of `domain`."""
    base = [c for c in result.curves if c.domain == domain and c.variant == BASELINE]
    recs = [r for r in result.report.runs if r.domain == domain and r.variant == BASELINE]
    return baseline_resolution([(c.compute, c.rate) for c in base], [r.fit["A"] for r in recs if r.fit],
                               [r.late_pass_rate for r in recs if r.late_pass_rate is not None], r0,
                               seeds=seeds, samples=samples)


def refit_fixed_a(result: AnalysisResult, summary: DomainSummary, rows: list[VariantDomain], fit_until: float,
                  burn_in: float | None) -> None:
    """A fixed to the mean A of the variants within the margin; B and C_mid refitted for their runs."""
    from scalerl.trainer.fit.sigmoid import fit_fixed_A

    within = [r for r in rows if r.A is not None and (r.variant == BASELINE or r.beyond_margin is False)]
    if len(within) < 2 or not any(r.variant == BASELINE for r in within):
        return
    a_fixed = float(np.mean([r.A for r in within]))
    if summary.R0 is not None and a_fixed <= summary.R0:
        return
    summary.fixed_A, summary.fixed_A_variants = a_fixed, [r.variant for r in within]
    names = set(summary.fixed_A_variants)
    curves = {(c.variant, c.seed): c for c in result.curves if c.domain == summary.domain}
    for rec in result.report.runs:
        if rec.domain != summary.domain or rec.variant not in names:
            continue
        c = curves[(rec.variant, rec.seed)]
        try:
            fit = fit_fixed_A(c.compute, c.rate, A=a_fixed, r0=summary.R0, burn_in=burn_in, fit_until=fit_until)
        except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
            rec.fixed_A_error = f"{type(exc).__name__}: {exc}"
            continue
        rec.fixed_A_fit = fit.to_dict()
        result.fixed_fits[(rec.variant, rec.seed, rec.domain)] = fit
    base_b = None
    for row in rows:
        bs = [r.fixed_A_fit["B"] for r in result.report.runs
              if r.domain == summary.domain and r.variant == row.variant and r.fixed_A_fit is not None]
        row.B_fixed = float(np.mean(bs)) if bs else None
        if row.variant == BASELINE:
            base_b = row.B_fixed
    for row in rows:
        if row.B_fixed is not None and base_b is not None:
            row.dB_fixed = row.B_fixed - base_b


def analyze(manifest: Manifest, out: Path, domains: list[str]) -> AnalysisResult:
    """Fits, margins and the fixed-A refit over the finished runs of the study in `out`."""
    spec = manifest.study
    fit_until = spec.fit_fraction * spec.budget
    done = [r for r in manifest.runs if (out / r.folder / "summary.json").is_file()]
    curves = [c for r in done for c in load_curves(out / r.folder, r.variant, r.seed, domains, spec.compute)]
    if spec.fit_fraction >= 1:  # every point, including the last step's overshoot of the budget
        fit_until = max([fit_until, *(float(c.compute.max()) for c in curves if c.compute.size)])
    result = AnalysisResult(report=Analysis(budget=spec.budget, compute=spec.compute, fit_until=fit_until,
                                            burn_in=spec.burn_in, domains=[], variants=[], runs=[]), curves=curves)
    order = [v.name for v in manifest.variants]
    for d in domains:
        r0 = shared_r0(curves, d)
        for c in (c for c in curves if c.domain == d):
            rec, fit = fit_run(c, r0, fit_until, spec.burn_in, late_from=spec.budget * 2 / 3)
            result.report.runs.append(rec)
            if fit is not None:
                result.fits[(c.variant, c.seed, d)] = fit
        runs_d = [r for r in result.report.runs if r.domain == d]
        margin, source = margin_for([r.fit["A"] for r in runs_d if r.variant == BASELINE and r.fit])
        n = [int(x) for c in curves if c.domain == d for x in c.n if x > 0]
        var = [p * (1 - p) for c in curves if c.domain == d for p in c.rate]
        se = [math.sqrt(p * (1 - p) / k) for c in curves if c.domain == d for p, k in zip(c.rate, c.n) if k > 0]
        starts = start_rates(curves, d)
        summary = DomainSummary(domain=d, R0=r0, margin=margin, margin_source=source, R0_runs=len(starts),
                                R0_sd=float(np.std(starts, ddof=1)) if len(starts) > 1 else None,
                                samples_per_point=min(n) if n else 0, max_point_se=max(se) if se else math.nan,
                                samples_for_margin=math.ceil(max(var, default=0.25) / POINT_SE_TARGET**2),
                                resolution=domain_resolution(result, d, r0, spec.seeds, min(n) if n else 0))
        base = None
        rows = []
        for name in order:
            row = summarize_variant(name, d, [r for r in runs_d if r.variant == name],
                                    sum(r.variant == name for r in manifest.runs), base, margin)
            base = row if name == BASELINE else base
            rows.append(row)
        refit_fixed_a(result, summary, rows, fit_until, spec.burn_in)
        target = summary.resolution.target_pass_rate if summary.resolution else None
        compare_to_baseline(rows, runs_d, [c for c in curves if c.domain == d], target)
        result.report.domains.append(summary)
        result.report.variants.extend(rows)
    return result
