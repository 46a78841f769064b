"""Sigmoid compute–performance fits (ScaleRL, arXiv 2510.13786, §2 and Appendix A.5).

Model (the paper's eq. 1)::

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)        R(0) = R0

`A` is the asymptotic reward, `B` the scaling exponent (efficiency), `C_mid` the compute at half the
gain, `R0` the reward before training. Compute is in whatever unit the caller passes (the paper:
GB200 GPU-hours); `C_mid` comes back in that unit.

Methods
- ``default``: variable projection, then a joint least-squares refinement. For fixed (B, C_mid) the
  model is linear in (A, R0), so a coarse grid over (log B, log C_mid) with (A, R0) solved in closed
  form finds the basin of the global minimum without a starting guess; scipy's trust-region
  least squares then refines all free parameters jointly with an analytic Jacobian. `R0` is fitted
  when ``r0`` is None (points at compute 0, the initial evaluation, pin it down) and fixed otherwise.
- ``paper``: the paper's procedure as Appendix A.5 states it (see ``scalerl.trainer.fit.paper``): a grid over
  A and C_mid, B fitted per cell with scipy, lowest sum of squares; R0 fixed.
- ``fit_fixed_A``: A held at a given value, B and C_mid (and R0 when not given) refitted, as the
  paper does to compare recipes whose A is within noise (§4, leave-one-out runs).
- ``fit_power_law``: ``R(C) = R0 + k C^alpha``, the unbounded alternative; it over-predicts when
  extrapolated because it never saturates.

Intervals (both methods, a departure: the paper reports none). Wald intervals at the optimum in the
coordinates (A, R0, log B, log C_mid): covariance ``s^2 (J^T J)^-1`` with ``s^2 = RSS / (n - p)`` and
Student-t quantiles on n - p degrees of freedom; B and C_mid intervals are exponentiated, so they are
positive and asymmetric. ``band(c)`` is the delta-method confidence band of the fitted curve at c
(``observation=True`` adds the residual variance: where a single new evaluation should fall).
Guarantee, measured in tests/trainer/fit/test_fit_recovery.py on synthetic curves from the paper's published
parameters with noise 0.01: 90 % intervals cover the true A, B, C_mid in 85–95 % of trials.
Non-guarantees: intervals assume independent, equal-variance noise around the sigmoid; they say
nothing about a run whose curve is not a sigmoid, and they widen (honestly) when the data stop well
before saturation. A fit hitting a bound of log B or log C_mid is flagged in ``warnings``.

Data handling: compute must be finite, >= 0 and strictly increasing (rows in step order). Points
with 0 < C < ``burn_in`` (the paper drops the first ~1.5k GPU-hours) or C > ``fit_until`` are left
out; points at C = 0 stay, because they measure R0. Inputs that cannot give a meaningful curve raise
``FitError``: too few points, no upward trend, compute not increasing, non-finite values.

Importable without torch or vLLM (numpy, scipy, pydantic); nothing runs at import.
"""

from __future__ import annotations

import logging
import math
from typing import Literal

import numpy as np
from scalerl.env.contracts.sigmoid import PARAMS, ArrayLike, SigmoidFit, gate, jacobian, sigmoid_curve
from scalerl.trainer.fit.model import LOG_B_BOUNDS, FitData, FitError, PowerLawFit, check_enough, check_trend, prepare

logger = logging.getLogger(__name__)

C_MID_SPAN = (1e-2, 1e3)
"""C_mid is searched between 1/100 of the smallest and 1000x the largest positive compute."""


def _linear_solve(s: np.ndarray, y: np.ndarray, fixed: dict[str, float]) -> tuple:
    """Best (A, R0) for gates s (grid..., n) given fixed values; returns (A, R0, rss) arrays."""
    t0, t1 = s, 1.0 - s  # columns multiplying A and R0
    if "A" in fixed and "R0" in fixed:
        a = np.full(s.shape[:-1], fixed["A"])
        r0 = np.full(s.shape[:-1], fixed["R0"])
    elif "R0" in fixed:
        r0 = np.full(s.shape[:-1], fixed["R0"])
        a = ((y - r0[..., None] * t1) * t0).sum(-1) / np.maximum((t0 * t0).sum(-1), 1e-300)
    elif "A" in fixed:
        a = np.full(s.shape[:-1], fixed["A"])
        r0 = ((y - a[..., None] * t0) * t1).sum(-1) / np.maximum((t1 * t1).sum(-1), 1e-300)
    else:
        s00, s01, s11 = (t0 * t0).sum(-1), (t0 * t1).sum(-1), (t1 * t1).sum(-1)
        b0, b1 = (t0 * y).sum(-1), (t1 * y).sum(-1)
        det = np.maximum(s00 * s11 - s01 * s01, 1e-300)
        a, r0 = (s11 * b0 - s01 * b1) / det, (s00 * b1 - s01 * b0) / det
    resid = y - r0[..., None] - (a - r0)[..., None] * s
    return a, r0, (resid * resid).sum(-1)


def _bounds(c: np.ndarray) -> tuple[tuple[float, float], tuple[float, float]]:
    pos = c[c > 0]
    log_cmid = (math.log(pos.min() * C_MID_SPAN[0]), math.log(pos.max() * C_MID_SPAN[1]))
    return LOG_B_BOUNDS, log_cmid


def _grid_start(data: FitData, fixed: dict[str, float], a_max: float | None = None) -> np.ndarray:
    """Global start: grid over (log B, log C_mid), (A, R0) by linear least squares per cell."""
    c, y = data.compute, data.reward
    pos = c[c > 0]
    log_b = np.linspace(math.log(0.3), math.log(8.0), 24)
    log_cmid = np.linspace(math.log(pos.min() / 3), math.log(pos.max() * 30), 48)
    s, _ = gate(log_b[:, None, None], log_cmid[None, :, None], c[None, None, :])
    a, r0, rss = _linear_solve(s, y, fixed)
    if a_max is not None and "A" not in fixed:
        # cells whose free A passes the bound are re-solved with A on it (the constrained optimum)
        a_b, r0_b, rss_b = _linear_solve(s, y, {**fixed, "A": a_max})
        over = a > a_max
        a, r0, rss = np.where(over, a_b, a), np.where(over, r0_b, r0), np.where(over, rss_b, rss)
    i, j = np.unravel_index(int(np.argmin(rss)), rss.shape)
    return np.array([a[i, j], r0[i, j], log_b[i], log_cmid[j]])


def _refine(data: FitData, theta0: np.ndarray, free: list[str], a_max: float | None = None) -> np.ndarray:
    """Joint trust-region least squares over the free parameters, analytic Jacobian."""
    from scipy.optimize import least_squares

    c, y = data.compute, data.reward
    idx = [PARAMS.index(p) for p in free]
    log_b_bounds, log_cmid_bounds = _bounds(c)
    a_lo = theta0[1] if "R0" not in free else -np.inf  # A >= R0 when R0 is fixed (paper: R0 <= A <= 1)
    a_hi = np.inf if a_max is None else a_max
    lo = np.array([a_lo, -np.inf, log_b_bounds[0], log_cmid_bounds[0]])[idx]
    hi = np.array([a_hi, np.inf, log_b_bounds[1], log_cmid_bounds[1]])[idx]
    theta = theta0.astype(float).copy()
    span = np.where(np.isfinite(hi - lo), hi - lo, 1.0)
    x0 = np.clip(theta[idx], lo + 1e-9 * span, hi - 1e-9 * span)

    def full(x: np.ndarray) -> np.ndarray:
        th = theta.copy()
        th[idx] = x
        return th

    res = least_squares(
        lambda x: sigmoid_curve(full(x), c) - y,
        x0,
        jac=lambda x: jacobian(full(x), c)[:, idx],
        bounds=(lo, hi),
        method="trf",
        x_scale="jac",
    )
    return full(res.x)


def _exp(x: float) -> float:
    """exp that saturates at inf: a badly determined log-parameter can have a huge standard error."""
    return math.exp(x) if x < 709.0 else math.inf


def _finish(
    data: FitData,
    theta: np.ndarray,
    free: list[str],
    method: str,
    level: float,
    warnings: list[str],
    a_max: float | None = None,
) -> SigmoidFit:
    """Residual variance, Wald covariance and intervals at `theta`; returns the SigmoidFit."""
    from scipy.stats import t as student_t

    c, y = data.compute, data.reward
    if not theta[0] > theta[1]:
        raise FitError(f"no upward trend: the best fit has A = {theta[0]:.4f} <= R0 = {theta[1]:.4f}")
    idx = [PARAMS.index(p) for p in free]
    jac = jacobian(theta, c)[:, idx]
    rss = float(np.sum((sigmoid_curve(theta, c) - y) ** 2))
    dof = int(c.size - len(idx))
    sigma2 = rss / dof
    cov = sigma2 * np.linalg.pinv(jac.T @ jac)
    tq = float(student_t.ppf(0.5 + level / 2, dof))
    se = dict(zip(free, np.sqrt(np.maximum(np.diag(cov), 0.0))))
    intervals: dict[str, tuple[float, float]] = {}
    for k, name in enumerate(PARAMS):
        half = tq * se.get(name, 0.0)
        lo, hi = theta[k] - half, theta[k] + half
        intervals[name] = (_exp(lo), _exp(hi)) if k >= 2 else (lo, hi)
    log_b_bounds, log_cmid_bounds = _bounds(c)
    for name, k, (blo, bhi) in (("B", 2, log_b_bounds), ("C_mid", 3, log_cmid_bounds)):
        if name in free and min(theta[k] - blo, bhi - theta[k]) < 1e-6:
            warnings.append(f"{name} = {math.exp(theta[k]):.4g} sits at its search bound: the data do "
                            "not determine it; treat the fit as unreliable")
    pos = c[c > 0]
    if pos.max() < math.exp(theta[3]):
        warnings.append(f"the fitted points end at C = {pos.max():.4g}, before C_mid = "
                        f"{math.exp(theta[3]):.4g}: A is an extrapolation beyond the data")
    a_lo, a_hi = intervals["A"]
    if "A" in free and a_max is not None:
        intervals["A"] = (a_lo, min(a_hi, a_max))  # a bounded quantity: the interval ends at the bound
        if a_max - theta[0] < 1e-6:
            warnings.append(f"A = {theta[0]:.4g} sits at its bound {a_max:g}: the data do not show the "
                            "curve saturating below it")
    if "A" in free and a_hi - a_lo > theta[0] - theta[1]:
        warnings.append("the A interval is wider than the gain A - R0: these data do not determine A")
    return SigmoidFit(
        A=float(theta[0]), R0=float(theta[1]), B=float(math.exp(theta[2])),
        C_mid=float(math.exp(theta[3])), intervals=intervals, level=level, method=method,
        n_points=int(c.size), fixed=[p for p in PARAMS if p not in free], sigma=math.sqrt(sigma2),
        dof=dof, rss=rss, compute_range=(float(pos.min()), float(pos.max())), free=list(free),
        covariance=cov.tolist(), t_quantile=tq, warnings=warnings,
    )


# ------------------------------------------------------------------------------------ public API
def fit_sigmoid(
    compute: ArrayLike,
    reward: ArrayLike,
    *,
    r0: float | None = None,
    burn_in: float | None = None,
    fit_until: float | None = None,
    method: Literal["default", "paper"] = "default",
    level: float = 0.9,
    a_max: float | None = None,
) -> SigmoidFit:
    """Fit R(C) to (compute, reward) rows in step order; R0 is fitted unless `r0` is given.

    `method="paper"` runs the paper's grid search (R0 = `r0`, else the mean reward at compute 0,
    else the first row's reward). The Wald intervals are deterministic (no resampling). `a_max`
    bounds A from above (1 for pass rates, as the paper's 0 <= A <= 1; with `r0` given A is also
    kept >= R0); its A interval ends at the bound.
    The paper method ignores it (its grid over A is the paper's).
    """
    if method not in ("default", "paper"):
        raise FitError(f"method must be 'default' or 'paper', not {method!r}")
    if not 0 < level < 1:
        raise FitError(f"level must be in (0, 1), not {level}")
    if method == "paper":
        from scalerl.trainer.fit.paper import paper_fit

        data, theta = paper_fit(compute, reward, r0=r0, burn_in=burn_in, fit_until=fit_until)
        return _finish(data, theta, ["A", "B", "C_mid"], "paper", level, [])
    return _fit_free(compute, reward, fixed={} if r0 is None else {"R0": float(r0)},
                     burn_in=burn_in, fit_until=fit_until, method="default", level=level, a_max=a_max)


def fit_fixed_A(
    compute: ArrayLike,
    reward: ArrayLike,
    *,
    A: float,
    r0: float | None = None,
    burn_in: float | None = None,
    fit_until: float | None = None,
    level: float = 0.9,
) -> SigmoidFit:
    """Refit B and C_mid (and R0 unless `r0` is given) with the asymptote held at `A`.

    The paper compares recipes whose fitted A agree within noise this way: fix A at their mean
    and compare B (§4). The A interval is (A, A).
    """
    fixed = {"A": float(A)} if r0 is None else {"A": float(A), "R0": float(r0)}
    return _fit_free(compute, reward, fixed=fixed, burn_in=burn_in, fit_until=fit_until,
                     method="fixed_A", level=level)


def _fit_free(
    compute: ArrayLike,
    reward: ArrayLike,
    *,
    fixed: dict[str, float],
    burn_in: float | None,
    fit_until: float | None,
    method: Literal["default", "fixed_A"],
    level: float,
    a_max: float | None = None,
) -> SigmoidFit:
    if not 0 < level < 1:
        raise FitError(f"level must be in (0, 1), not {level}")
    data = prepare(compute, reward, burn_in=burn_in, fit_until=fit_until, keep_zero="R0" not in fixed)
    free = [p for p in PARAMS if p not in fixed]
    check_enough(data, len(free))
    check_trend(data)
    theta0 = _grid_start(data, fixed, a_max)
    theta = _refine(data, theta0, free, a_max)
    return _finish(data, theta, free, method, level, [], a_max)


def fit_power_law(
    compute: ArrayLike,
    reward: ArrayLike,
    *,
    r0: float | None = None,
    burn_in: float | None = None,
    fit_until: float | None = None,
) -> PowerLawFit:
    """Fit R(C) = R0 + k C^alpha (alpha in [0.01, 3]; R0 fitted unless `r0` is given)."""
    from scipy.optimize import minimize_scalar

    data = prepare(compute, reward, burn_in=burn_in, fit_until=fit_until, keep_zero=r0 is None)
    check_enough(data, 3 if r0 is None else 2)
    check_trend(data)
    c, y = data.compute, data.reward
    scale = float(c[c > 0].max())  # C / scale keeps C^alpha well conditioned

    def solve(log_alpha: float) -> tuple[float, float, float]:
        x = np.power(c / scale, math.exp(log_alpha))
        if r0 is None:
            k, b = np.polyfit(x, y, 1)
        else:
            b, k = float(r0), float(np.dot(x, y - r0) / max(np.dot(x, x), 1e-300))
        return float(k), float(b), float(np.sum((y - b - k * x) ** 2))

    best = minimize_scalar(lambda la: solve(la)[2], bounds=(math.log(0.01), math.log(3.0)),
                           method="bounded", options={"xatol": 1e-6})
    k, b, rss = solve(float(best.x))
    alpha = math.exp(float(best.x))
    return PowerLawFit(R0=b, k=k / scale**alpha, alpha=alpha, n_points=int(c.size), rss=rss)
