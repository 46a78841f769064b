"""What a study can resolve, said before its comparisons: the smallest difference the planned seeds can
tell apart at 2 standard errors, from the baseline's own seeds; and whether each fit determined A and B.

From the baseline's runs of one domain (pure functions, tested on hand-made curves):
- the spread (sample standard deviation over seeds) of the fitted A, of the late pass rate (the mean
  of the evaluations in the last third of the budget) and of the compute to reach a target pass rate
  (the first crossing, interpolated linearly between evaluations; the target is halfway from the
  shared start R0 to the baseline's mean late pass rate, a rate every baseline run should reach);
- the resolution of a difference between two recipes' means over `seeds` seeds each:
  2 x sd x sqrt(2 / seeds). A variant's difference smaller than that is below the resolution.
- the standard error of one variant's difference from the baseline, from both recipes' own seed
  spreads (Welch): sqrt(sd_v^2 / n_v + sd_b^2 / n_b); the report prints it beside every difference;
- the floor set by evaluation noise alone: 2 x sqrt(2 p (1 - p) / (samples x seeds)) for the late
  pass rate p (one evaluation per seed; the spread over seeds already contains this noise).
Not guaranteed: with two baseline seeds the spread itself is uncertain by a factor of ~2 either way;
the figures say how many seeds they come from.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field
from scalerl.env.contracts.records import Strict


class Resolution(Strict):
    """The smallest differences a study with `seeds` seeds per recipe resolves at 2 standard errors."""

    seeds: int = Field(description="seeds per recipe the resolution is for")
    from_baseline_runs: int = Field(description="baseline runs the spreads were measured on")
    A: float | None = None
    late_pass_rate: float | None = None
    target_pass_rate: float | None = None
    compute_to_target: float | None = Field(default=None, description="in the study's compute unit")
    eval_floor: float | None = Field(
        default=None, description="the late pass rate's resolution from evaluation noise alone")


def compute_to_target(compute: np.ndarray, rate: np.ndarray, target: float) -> float | None:
    """The compute at which the curve first reaches `target` (linear between evaluations); None if never."""
    for i in range(compute.size):
        if rate[i] >= target:
            if i == 0 or rate[i] == rate[i - 1]:
                return float(compute[i])
            frac = (target - rate[i - 1]) / (rate[i] - rate[i - 1])
            return float(compute[i - 1] + frac * (compute[i] - compute[i - 1]))
    return None


def resolvable_difference(values: list[float], seeds: int) -> float | None:
    """2 standard errors of a difference of two means over `seeds` seeds, from the spread of `values`."""
    if len(values) < 2:
        return None
    return 2.0 * float(np.std(values, ddof=1)) * math.sqrt(2.0 / seeds)


def difference_se(values: list[float], base: list[float]) -> float | None:
    """Standard error of mean(values) - mean(base), each from its own seed spread; None under 2 seeds."""
    if len(values) < 2 or len(base) < 2:
        return None
    return math.sqrt(float(np.var(values, ddof=1)) / len(values) + float(np.var(base, ddof=1)) / len(base))


def eval_floor(pass_rate: float | None, samples: int, seeds: int) -> float | None:
    if pass_rate is None or samples < 1:
        return None
    return 2.0 * math.sqrt(2.0 * pass_rate * (1.0 - pass_rate) / (samples * seeds))


def baseline_resolution(curves: list[tuple[np.ndarray, np.ndarray]], fitted_as: list[float],
                        late_rates: list[float], r0: float | None, *, seeds: int, samples: int) -> Resolution:
    """The resolution from the baseline's (compute, rate) curves, fitted A's and late pass rates."""
    late = float(np.mean(late_rates)) if late_rates else None
    target = None if late is None or r0 is None or late <= r0 else r0 + (late - r0) / 2
    reach = [] if target is None else [compute_to_target(c, r, target) for c, r in curves]
    reached = [x for x in reach if x is not None]
    return Resolution(seeds=seeds, from_baseline_runs=len(curves), A=resolvable_difference(fitted_as, seeds),
                      late_pass_rate=resolvable_difference(late_rates, seeds), target_pass_rate=target,
                      compute_to_target=resolvable_difference(reached, seeds) if len(reached) == len(reach) else None,
                      eval_floor=eval_floor(late, samples, seeds))


def fit_status(fit: dict | None) -> str:
    """Whether a fit determined A and B: `determined`, or what is pinned or undetermined (from its warnings)."""
    if fit is None:
        return "no fit"
    problems = []
    for warning in fit.get("warnings", []):
        name = warning.split(" ", 1)[0]
        if "sits at its" in warning:
            problems.append(f"{name} at a bound")
        elif "do not determine A" in warning:
            problems.append("A undetermined (interval wider than the gain)")
        elif "extrapolation beyond the data" in warning:
            problems.append("A extrapolated (points end before C_mid)")
    return "; ".join(dict.fromkeys(problems)) or "A and B determined"
