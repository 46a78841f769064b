"""The sigmoid compute–performance model, its fitted results, and the input checks every fit method shares.

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)        R(0) = R0

`FitData` is validated input (`prepare`: finite, compute >= 0 and strictly increasing, burn-in and
fit window applied); `check_enough` / `check_trend` raise `FitError` for data that cannot give a
meaningful curve. `SigmoidFit` / `PowerLawFit` are results with `predict` and (sigmoid) `band`.
The fitting methods live in `scalerl.trainer.fit.sigmoid` (default) and `scalerl.trainer.fit.paper` (the paper's grid).
Importable without torch (numpy, scipy, pydantic).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

ArrayLike = Sequence[float] | np.ndarray
PARAMS = ("A", "R0", "B", "C_mid")
"""Internal coordinates are (A, R0, log B, log C_mid), in this order."""
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


class SigmoidFit(BaseModel):
    """A fitted sigmoid with its intervals; ``predict`` and ``band`` evaluate it anywhere."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    A: float
    B: float
    C_mid: float
    R0: float
    intervals: dict[str, tuple[float, float]]
    level: float
    method: Literal["default", "paper", "fixed_A"]
    n_points: int
    fixed: list[str]
    sigma: float
    """Residual standard deviation sqrt(RSS / dof)."""
    dof: int
    rss: float
    compute_range: tuple[float, float]
    """Smallest and largest compute among the points fitted."""
    free: list[str]
    covariance: list[list[float]]
    """Covariance of the free parameters in internal coordinates (A, R0, log B, log C_mid)."""
    t_quantile: float
    warnings: list[str] = []

    def _theta(self) -> np.ndarray:
        return np.array([self.A, self.R0, math.log(self.B), math.log(self.C_mid)])

    def predict(self, c: float | ArrayLike) -> float | np.ndarray:
        out = sigmoid_curve(self._theta(), np.asarray(c, dtype=float))
        return float(out) if np.ndim(c) == 0 else out

    def band(self, c: float | ArrayLike, observation: bool = False) -> tuple:
        """(lo, hi) at `c`: the `level` confidence band of the curve; plus noise if `observation`."""
        carr = np.atleast_1d(np.asarray(c, dtype=float))
        jac = jacobian(self._theta(), carr)[:, [PARAMS.index(p) for p in self.free]]
        var = np.einsum("ij,jk,ik->i", jac, np.asarray(self.covariance).reshape(jac.shape[1], -1), jac)
        if observation:
            var = var + self.sigma**2
        mid = sigmoid_curve(self._theta(), carr)
        half = self.t_quantile * np.sqrt(np.maximum(var, 0.0))
        if np.ndim(c) == 0:
            return float(mid[0] - half[0]), float(mid[0] + half[0])
        return mid - half, mid + half

    def to_dict(self) -> dict:
        return self.model_dump(mode="json")


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


# ---------------------------------------------------------------------------------------- the curve
def gate(log_b: np.ndarray | float, log_cmid: np.ndarray | float, c: np.ndarray) -> tuple:
    """s(C) = 1 / (1 + (C_mid/C)^B) and z-derivative pieces; s(0) = 0. Broadcasts over grids."""
    pos = c > 0
    log_c = np.log(np.where(pos, c, 1.0))
    dlog = log_c - log_cmid
    z = np.exp(log_b) * dlog
    s = np.where(pos, 0.5 * (1.0 + np.tanh(0.5 * z)), 0.0)  # tanh form: no overflow for large |z|
    return s, np.where(pos, dlog, 0.0)


def sigmoid_curve(theta: np.ndarray, c: np.ndarray) -> np.ndarray:
    """R(C) for internal coordinates theta = (A, R0, log B, log C_mid)."""
    s, _ = gate(theta[2], theta[3], c)
    return theta[1] + (theta[0] - theta[1]) * s


def jacobian(theta: np.ndarray, c: np.ndarray) -> np.ndarray:
    """dR/d(A, R0, log B, log C_mid), shape (n, 4)."""
    s, dlog = gate(theta[2], theta[3], c)
    gain_ds = (theta[0] - theta[1]) * s * (1.0 - s) * math.exp(theta[2])
    return np.stack([s, 1.0 - s, gain_ds * dlog, -gain_ds], axis=1)


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


# ------------------------------------------------------------------------------ variable projection
