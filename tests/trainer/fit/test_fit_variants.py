"""Fixed-A refit, power law, windows, R0 handling, prediction band and the SigmoidFit API."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from scalerl.trainer.fit.sigmoid import fit_fixed_A, fit_power_law, fit_sigmoid
from scalerl.trainer.fit.synthetic import published_curves, trial_rng

SPECS = published_curves()
MAIN = SPECS[0]  # ScaleRL 8B: A 0.61, B 1.92, C_mid 2542


def _clean(spec):
    c = spec.grid()
    return c, spec.truth(c)


def _noisy(spec, k=0):
    return spec.sample(trial_rng(7, 0, k))


def test_fixed_A_recovers_B_and_C_mid_on_clean_data():
    c, y = _clean(MAIN)
    f = fit_fixed_A(c, y, A=MAIN.A)
    assert f.method == "fixed_A" and "A" in f.fixed and f.intervals["A"] == (MAIN.A, MAIN.A)
    assert f.B == pytest.approx(MAIN.B, rel=1e-4) and f.C_mid == pytest.approx(MAIN.C_mid, rel=1e-4)


def test_fixed_A_narrows_the_B_interval():
    """Holding A removes its correlation with B: the B interval shrinks (why the paper fixes A)."""
    c, y = _noisy(MAIN)
    free, fixed = fit_sigmoid(c, y), fit_fixed_A(c, y, A=MAIN.A)
    width = lambda f: f.intervals["B"][1] - f.intervals["B"][0]
    assert width(fixed) < 0.8 * width(free)


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_power_law_over_predicts_where_the_sigmoid_does_not(spec):
    c, y = _clean(spec)
    half = spec.C_end / 2
    sig = fit_sigmoid(c, y, fit_until=half).predict(c[-1])
    power = fit_power_law(c, y, fit_until=half).predict(c[-1])
    assert abs(sig - y[-1]) < 0.002
    assert power > y[-1] + 0.015


def test_burn_in_drops_early_points_but_keeps_the_initial_evaluation():
    c, y = _noisy(MAIN)
    burn = 1500.0
    fitted_r0 = fit_sigmoid(c, y, burn_in=burn)
    given_r0 = fit_sigmoid(c, y, burn_in=burn, r0=0.3)
    n_late = int(np.count_nonzero(c >= burn))
    assert fitted_r0.n_points == n_late + 1  # + the compute-0 row that measures R0
    assert given_r0.n_points == n_late and given_r0.R0 == 0.3 and "R0" in given_r0.fixed
    assert fitted_r0.compute_range[0] >= burn


def test_fit_until_holds_out_late_points():
    c, y = _noisy(MAIN)
    f = fit_sigmoid(c, y, fit_until=8000.0)
    assert f.compute_range[1] <= 8000.0 and f.n_points == int(np.count_nonzero(c <= 8000.0))


def test_initial_evaluation_pins_R0():
    c, y = _noisy(MAIN)
    with_zero, without = fit_sigmoid(c, y), fit_sigmoid(c[1:], y[1:])
    width = lambda f: f.intervals["R0"][1] - f.intervals["R0"][0]
    assert width(with_zero) < width(without)


def test_predict_and_band_shapes_and_order():
    c, y = _noisy(MAIN)
    f = fit_sigmoid(c, y, fit_until=8000.0)
    assert isinstance(f.predict(16000.0), float)
    grid = np.array([0.0, 4000.0, 16000.0, 64000.0])
    lo, hi = f.band(grid)
    mid = f.predict(grid)
    assert lo.shape == hi.shape == mid.shape == (4,)
    assert np.all(lo <= mid) and np.all(mid <= hi)
    olo, ohi = f.band(grid, observation=True)
    assert np.all(olo < lo) and np.all(ohi > hi)
    assert (hi - lo)[2] > (hi - lo)[1]  # extrapolation is less certain than interpolation
    assert f.predict(0.0) == pytest.approx(f.R0)


def test_unsaturated_data_warn_that_A_is_an_extrapolation():
    c = np.linspace(100.0, 6000.0, 40)
    y = 0.3 + 3e-5 * c + np.random.default_rng(0).normal(0, 0.01, c.size)
    f = fit_sigmoid(c, y)
    assert any("extrapolation" in w for w in f.warnings)
    assert any("do not determine A" in w for w in f.warnings)


def test_saturated_data_give_no_warnings():
    c, y = _noisy(MAIN)
    assert fit_sigmoid(c, y).warnings == []


def test_to_dict_is_json_with_the_documented_keys():
    c, y = _noisy(MAIN)
    d = json.loads(json.dumps(fit_sigmoid(c, y).to_dict()))
    assert {"A", "B", "C_mid", "R0", "intervals", "level", "method", "n_points"} <= d.keys()
    assert set(d["intervals"]) == {"A", "B", "C_mid", "R0"} and d["level"] == 0.9


def test_level_widens_intervals():
    c, y = _noisy(MAIN)
    f90, f99 = fit_sigmoid(c, y), fit_sigmoid(c, y, level=0.99)
    assert f99.intervals["A"][0] < f90.intervals["A"][0] and f99.intervals["A"][1] > f90.intervals["A"][1]


def test_fit_module_imports_without_torch_or_vllm():
    code = ("import sys, scalerl.trainer.fit.sigmoid, scalerl.trainer.fit.paper, scalerl.trainer.fit.data, "
            "scalerl.trainer.commands.fit; "
            "bad = [m for m in ('torch', 'vllm', 'matplotlib', 'scipy') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_flat_short_run_fits_with_unbounded_intervals_instead_of_overflowing():
    """Measured on a CPU-default run: B and C_mid are not determined, and exp() of their interval
    ends overflowed (OverflowError ended the run before its summary). Intervals now saturate at inf."""
    c = np.array([0.0, 75.24, 129.14, 174.01, 225.34, 273.19, 323.61, 369.91, 458.81])
    y = np.array([0.1004, 0.1161, 0.1435, 0.1648, 0.0822, 0.1654, 0.1604, 0.1434, 0.1279])
    fit = fit_sigmoid(c, y)
    assert 0.0 < fit.A <= 1.0
    assert any(hi == float("inf") for _, hi in fit.intervals.values())
    json.dumps(fit.to_dict())  # the run folder's curves/<domain>.json must still be written
