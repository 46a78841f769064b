"""The sigmoid fit record and the curve it describes: the one definition the trainer and the dashboard share.

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)        R(0) = R0

Why a contract: the trainer writes `SigmoidFit` into `curves/<domain>.json` and the dashboard reads it
back; the record is only meaningful with its formula and the coordinate order of its covariance
(`PARAMS`, internal coordinates (A, R0, log B, log C_mid)), so the record, `predict` and the
delta-method `band` live together here, in the lowest layer, which both may import. `COMPUTE_AXES`
names the compute axes of a run's `metrics.jsonl` with their units, for every axis label.

Guaranteed: pure numpy evaluation, no I/O, nothing at import. Not here: fitting (scipy, in
`scalerl.trainer.fit.sigmoid`) and the input checks of a fit (`scalerl.trainer.fit.model`).
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

COMPUTE_AXES: dict[str, tuple[str, float, str]] = {
    "device_hours": ("compute_device_s", 1 / 3600, "compute (device-hours)"),
    "device_s": ("compute_device_s", 1.0, "compute (device-seconds)"),
    "samples": ("compute_samples", 1.0, "compute (samples)"),
    "tokens": ("compute_tokens", 1.0, "compute (generated tokens)"),
    "flops": ("compute_flops", 1.0, "compute (FLOPs)"),
}
"""Compute axis -> (its key in a `metrics.jsonl` line, the scale applied to that key, the axis label with unit)."""


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
    """What the fit cannot tell (A at its bound, data ending before C_mid, ...): every reader shows these."""

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
