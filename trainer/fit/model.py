"""The input checks every fit method shares, the power-law result, and the fit's search bounds.

The sigmoid itself (`SigmoidFit`, the curve, its Jacobian and band) is the record the trainer writes and
the dashboard reads, so it is defined once in `scalerl.env.contracts.sigmoid`. Here: `FitData` is
validated input (`prepare`: finite, compute >= 0 and strictly increasing, burn-in and fit window
applied); `check_enough` / `check_trend` raise `FitError` for data that cannot give a meaningful
curve; `PowerLawFit` is the unbounded alternative. The fitting methods live in
`scalerl.trainer.fit.sigmoid` (default) and `scalerl.trainer.fit.paper` (the paper's grid).
Importable without torch (numpy, pydantic).
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict
from scalerl.env.contracts.sigmoid import ArrayLike

LOG_B_BOUNDS = (math.log(0.05), math.log(50.0))
EXTRA_POINTS = 3
"""Minimum points = free parameters + EXTRA_POINTS, so the residual variance has >= 3 dof."""


class FitError(ValueError):
    """Input that cannot give a meaningful curve; the message says why and what to change."""


class FitData(BaseModel):
    """Validated, windowed data a fit ran on."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True)
    compute: np.ndarray
    reward: np.ndarray


class PowerLawFit(BaseModel):
    """``R(C) = R0 + k * C^alpha``: unbounded, shown alongside the sigmoid for contrast."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    R0: float
    k: float
    alpha: float
    n_points: int
    rss: float

    def predict(self, c: float | ArrayLike) -> float | np.ndarray:
        carr = np.asarray(c, dtype=float)
        out = self.R0 + self.k * np.power(np.maximum(carr, 0.0), self.alpha)
        return float(out) if np.ndim(c) == 0 else out

    def to_dict(self) -> dict:
        return self.model_dump(mode="json")


# ------------------------------------------------------------------------------------- input checks
def prepare(
    compute: ArrayLike,
    reward: ArrayLike,
    *,
    burn_in: float | None = None,
    fit_until: float | None = None,
    keep_zero: bool = True,
) -> FitData:
    """Validate and window the data; raise FitError naming the first bad row (0-based)."""
    c = np.asarray(compute, dtype=float).ravel()
    y = np.asarray(reward, dtype=float).ravel()
    if c.shape != y.shape:
        raise FitError(f"compute has {c.size} values but reward has {y.size}; they must pair up")
    for name, arr in (("compute", c), ("reward", y)):
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise FitError(f"{name} is not finite at row {bad[0]} ({arr[bad[0]]})")
    if c.size and c.min() < 0:
        raise FitError(f"compute is negative at row {int(np.argmin(c))} ({c.min()})")
    steps = np.flatnonzero(np.diff(c) <= 0)
    if steps.size:
        i = int(steps[0]) + 1
        raise FitError(
            f"compute is not increasing at row {i} ({c[i]} after {c[i - 1]}); pass rows in step "
            "order with cumulative compute"
        )
    if burn_in is not None and fit_until is not None and fit_until <= burn_in:
        raise FitError(f"fit_until ({fit_until}) must be larger than burn_in ({burn_in})")
    keep = c > 0
    if burn_in is not None:
        keep &= c >= burn_in
    if fit_until is not None:
        keep &= c <= fit_until
    if keep_zero:
        keep |= c == 0
    return FitData(compute=c[keep], reward=y[keep])


def check_enough(data: FitData, n_free: int) -> None:
    n_pos = int(np.count_nonzero(data.compute > 0))
    need = n_free + EXTRA_POINTS
    if n_pos < need:
        raise FitError(
            f"too few points: {n_pos} evaluation points with compute > 0 in the fit window, need at "
            f"least {need} to fit {n_free} parameters with an error estimate (widen burn_in/fit_until "
            "or evaluate more often)"
        )


def check_trend(data: FitData) -> None:
    """Reject data with no upward trend: the rank correlation of reward with compute must be > 0."""
    y = data.reward
    if np.ptp(y) == 0:
        raise FitError("no upward trend: every reward in the fit window is the same value")
    rank_y = np.argsort(np.argsort(y, kind="stable"), kind="stable").astype(float)
    rank_c = np.arange(y.size, dtype=float)
    rho = float(np.corrcoef(rank_c, rank_y)[0, 1])
    if not rho > 0:
        raise FitError(
            f"no upward trend: reward does not increase with compute (Spearman rho = {rho:.3f}); "
            "a sigmoid gain cannot be fitted"
        )
