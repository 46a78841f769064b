"""The paper's fitting procedure (arXiv 2510.13786, Appendix A.5), kept as a selectable baseline.

As the paper states it: drop the early points before a burn-in (the paper: ~1.5k GPU-hours), search
a grid over A and C_mid, fit B for each cell with scipy, and keep the cell with the lowest sum of
squared residuals. R0 is not fitted.

What the paper does not pin down, and what this module chooses (departures are documented here and
in docs/fit.md):
- A grid: multiples of 0.005 (the precision the paper prints A with) from max(R0, y_max - 0.05)
  to y_max + 0.15, where y_max is the largest reward in the fit window (40 values). An asymptote
  more than 0.15 above the best evaluation so far is outside the grid: the fit then sits at the edge.
- C_mid grid: log-spaced in steps of 5 % from 1/2 of the smallest to 3x the largest compute fitted
  (about 100 values for a 60-point run).
- B per cell: `scipy.optimize.minimize_scalar` (bounded, log B to 1e-3) over log B in
  [log 0.05, log 50].
- R0: the caller's `r0`; else the mean reward at compute 0 (the initial evaluation); else the first
  row's reward, with a log line saying so.
The result is as precise as the grid (A to +-0.0025, C_mid to a grid step); it is slow by design
(one scalar optimisation per cell), which is what `benchmarks/bench_fit.py` measures against.
"""

from __future__ import annotations

import logging
import math

import numpy as np
from scalerl.env.contracts.sigmoid import ArrayLike
from scalerl.trainer.fit.model import LOG_B_BOUNDS, FitData, check_enough, check_trend, prepare

logger = logging.getLogger(__name__)

A_STEP = 0.005
A_BELOW_MAX, A_ABOVE_MAX = 0.05, 0.15
C_MID_RATIO = 1.05
C_MID_SPAN = (0.5, 3.0)


def paper_r0(compute: ArrayLike, reward: ArrayLike, r0: float | None) -> float:
    """R0 for the paper method: given, else mean reward at compute 0, else the first reward."""
    if r0 is not None:
        return float(r0)
    c = np.asarray(compute, dtype=float).ravel()
    y = np.asarray(reward, dtype=float).ravel()
    zero = c == 0
    if zero.any():
        return float(y[zero].mean())
    logger.info("paper fit: no evaluation at compute 0; R0 taken as the first reward %.4f", y[0])
    return float(y[0])


def _fit_b(dlog: np.ndarray, target: np.ndarray, gain: float) -> tuple[float, float]:
    """One grid cell: B by bounded scalar minimisation of the sum of squares; (sse, log B)."""
    from scipy.optimize import minimize_scalar
    from scipy.special import expit

    def sse(log_b: float) -> float:
        r = target - gain * expit(math.exp(log_b) * dlog)
        return float(r @ r)

    res = minimize_scalar(sse, bounds=LOG_B_BOUNDS, method="bounded", options={"xatol": 1e-3})
    return float(res.fun), float(res.x)


def paper_fit(
    compute: ArrayLike,
    reward: ArrayLike,
    *,
    r0: float | None,
    burn_in: float | None,
    fit_until: float | None,
) -> tuple[FitData, np.ndarray]:
    """Grid over (A, C_mid), B per cell; returns the windowed data and (A, R0, log B, log C_mid)."""
    data = prepare(compute, reward, burn_in=burn_in, fit_until=fit_until, keep_zero=False)
    check_enough(data, 3)
    check_trend(data)
    r0_value = paper_r0(compute, reward, r0)
    c, y = data.compute, data.reward
    y_max = float(y.max())
    first = math.ceil(max(r0_value, y_max - A_BELOW_MAX) / A_STEP + 1e-9)
    last = math.floor((y_max + A_ABOVE_MAX) / A_STEP)
    a_grid = A_STEP * np.arange(first, last + 1)
    log_lo, log_hi = math.log(c.min() * C_MID_SPAN[0]), math.log(c.max() * C_MID_SPAN[1])
    log_cmid_grid = np.arange(log_lo, log_hi + 1e-9, math.log(C_MID_RATIO))
    best = (math.inf, 0.0, 0.0, 0.0)
    log_c, target = np.log(c), y - r0_value
    for a in a_grid:
        for log_cmid in log_cmid_grid:
            sse, log_b = _fit_b(log_c - log_cmid, target, a - r0_value)
            if sse < best[0]:
                best = (sse, float(a), log_b, float(log_cmid))
    _, a, log_b, log_cmid = best
    return data, np.array([a, r0_value, log_b, log_cmid])
