"""Synthetic validation curves from the paper's published fit parameters (tests and benchmark).

Protocol (stated once, used by tests/trainer/fit/test_fit_recovery.py and benchmarks/bench_fit.py):
- every row of ``published_fit_params.csv`` with A, B and C_mid (the ten Table 1 rows);
- R0 = 0.30 for every row (the paper never prints R0; 0.30 is a plausible initial mean@16 pass rate
  and leaves a gain A - R0 of 0.19-0.41);
- evaluation grid: the initial evaluation at compute 0 plus 60 evenly spaced evaluations (one every
  100 steps of a 6,000-step run) up to C_end, the run length the paper states for the row
  ("extrapolated to 100k" -> 100k GPU-hours; Scout 45k, bs2048 100k) and otherwise the 16k GPU-hours
  of its §4 protocol, but never less than 6 * C_mid (a run that stops before it can identify A does
  not test a fitter; this lifts ScaleRL-32k to 67.6k and four rows to 16.9k-18.3k). The curves reach
  92-99 % of their gain by C_end; "first half" means C <= C_end / 2 (the paper's fit-to-8k,
  extrapolate-to-16k protocol for the main 8B row);
- Gaussian noise sigma = 0.01 on every evaluation (1,000 prompts x 16 samples at p ~ 0.5 gives a
  standard error near 0.004 plus prompt sampling; 0.01 leaves room for both);
- trial k of a row draws its noise from ``numpy.random.default_rng((seed, row_index, k))``.
The reference folder is ``scalerl.env.contracts.paths.reference_dir()`` (``$SCALERL_REFERENCE`` or the vendored
``datasets/reference``).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict
from scalerl.env.contracts.paths import reference_dir

R0_STATED = 0.30
NOISE_SIGMA = 0.01
N_EVALS = 60
MIN_C_END_OVER_C_MID = 6.0
DEFAULT_RUN_GPU_HOURS = 16_000.0
_STATED_END = re.compile(r"extrapolated to (\d+(?:\.\d+)?)k")


class CurveSpec(BaseModel):
    """One published curve: name and true parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    A: float
    B: float
    C_mid: float
    C_end: float
    R0: float = R0_STATED

    def truth(self, c: np.ndarray) -> np.ndarray:
        pos = np.where(c > 0, c, 1.0)
        return np.where(c > 0, self.R0 + (self.A - self.R0) / (1.0 + (self.C_mid / pos) ** self.B), self.R0)

    def grid(self) -> np.ndarray:
        return np.concatenate([[0.0], np.linspace(self.C_end / N_EVALS, self.C_end, N_EVALS)])

    def sample(self, rng: np.random.Generator, sigma: float = NOISE_SIGMA) -> tuple[np.ndarray, np.ndarray]:
        c = self.grid()
        return c, self.truth(c) + rng.normal(0.0, sigma, c.size)


def published_curves(path: Path | None = None) -> list[CurveSpec]:
    """Rows of published_fit_params.csv that have A, B and C_mid."""
    path = path or reference_dir() / "scalerl_curves" / "published_fit_params.csv"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found; set SCALERL_REFERENCE to the reference folder")
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [_spec(r) for r in rows if r["A"] and r["B"] and r["C_mid"]]


def _spec(row: dict[str, str]) -> CurveSpec:
    stated = _STATED_END.search(row["fit_range_gpu_hours"])
    run_end = 1000.0 * float(stated.group(1)) if stated else DEFAULT_RUN_GPU_HOURS
    c_mid = float(row["C_mid"])
    return CurveSpec(name=row["curve"], A=float(row["A"]), B=float(row["B"]), C_mid=c_mid,
                     C_end=max(run_end, MIN_C_END_OVER_C_MID * c_mid))


def trial_rng(seed: int, row: int, trial: int) -> np.random.Generator:
    return np.random.default_rng((seed, row, trial))
