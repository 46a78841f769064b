"""Inputs that cannot give a meaningful curve raise FitError with a message saying why."""

from __future__ import annotations

import numpy as np
import pytest
from scalerl.trainer.fit.sigmoid import FitError, fit_fixed_A, fit_power_law, fit_sigmoid

C = np.linspace(100.0, 6000.0, 30)
GOOD = 0.3 + 0.3 / (1 + (2000.0 / C) ** 2)
FITTERS = {
    "default": lambda c, y, **kw: fit_sigmoid(c, y, **kw),
    "paper": lambda c, y, **kw: fit_sigmoid(c, y, method="paper", r0=0.3, **kw),
    "fixed_A": lambda c, y, **kw: fit_fixed_A(c, y, A=0.6, **kw),
    "power_law": lambda c, y, **kw: fit_power_law(c, y, **kw),
}


@pytest.mark.parametrize("name", FITTERS)
def test_too_few_points(name):
    with pytest.raises(FitError, match="too few points"):
        FITTERS[name](C[:4], GOOD[:4])


@pytest.mark.parametrize("name", FITTERS)
def test_too_few_points_after_window(name):
    with pytest.raises(FitError, match="too few points: 2 "):
        FITTERS[name](C, GOOD, burn_in=5700.0)


@pytest.mark.parametrize("name", FITTERS)
def test_flat_reward_has_no_upward_trend(name):
    with pytest.raises(FitError, match="no upward trend"):
        FITTERS[name](C, np.full_like(C, 0.4))


@pytest.mark.parametrize("name", FITTERS)
def test_falling_reward_has_no_upward_trend(name):
    with pytest.raises(FitError, match="no upward trend.*rho"):
        FITTERS[name](C, GOOD[::-1])


@pytest.mark.parametrize("name", FITTERS)
def test_compute_not_increasing_names_row(name):
    c = C.copy()
    c[7] = c[6]
    with pytest.raises(FitError, match="not increasing at row 7"):
        FITTERS[name](c, GOOD)


def test_unsorted_compute_is_rejected_not_sorted():
    with pytest.raises(FitError, match="not increasing at row 1"):
        fit_sigmoid(C[::-1], GOOD)


@pytest.mark.parametrize("bad, match", [(np.nan, "reward is not finite at row 3"),
                                        (np.inf, "reward is not finite at row 3")])
def test_non_finite_reward(bad, match):
    y = GOOD.copy()
    y[3] = bad
    with pytest.raises(FitError, match=match):
        fit_sigmoid(C, y)


def test_negative_compute():
    c = C - 200.0
    with pytest.raises(FitError, match="compute is negative at row 0"):
        fit_sigmoid(c, GOOD)


def test_length_mismatch():
    with pytest.raises(FitError, match="30 values but reward has 29"):
        fit_sigmoid(C, GOOD[:-1])


def test_window_must_be_ordered():
    with pytest.raises(FitError, match="fit_until .* must be larger than burn_in"):
        fit_sigmoid(C, GOOD, burn_in=3000.0, fit_until=2000.0)


@pytest.mark.parametrize("kw, match", [({"method": "grid"}, "method must be"), ({"level": 1.0}, "level must be")])
def test_bad_options(kw, match):
    with pytest.raises(FitError, match=match):
        fit_sigmoid(C, GOOD, **kw)


def test_fit_error_is_a_value_error():
    assert issubclass(FitError, ValueError)
