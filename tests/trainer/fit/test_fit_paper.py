"""The paper's grid method (Appendix A.5) as a baseline: agreement with the default on clean data."""

from __future__ import annotations

import numpy as np
import pytest
from scalerl.trainer.fit.paper import A_STEP, paper_r0
from scalerl.trainer.fit.sigmoid import fit_sigmoid
from scalerl.trainer.fit.synthetic import published_curves, trial_rng

SPECS = published_curves()
QUICK = {0}  # the main 8B row; every row under `slow` (a paper fit takes seconds)


def _params(spec_rows):
    return [pytest.param(s, id=s.name, marks=() if i in QUICK else pytest.mark.slow)
            for i, s in enumerate(spec_rows)]


@pytest.mark.parametrize("spec", _params(SPECS))
def test_paper_and_default_agree_on_clean_data(spec):
    c = spec.grid()
    y = spec.truth(c)
    paper = fit_sigmoid(c, y, method="paper", r0=spec.R0)
    default = fit_sigmoid(c, y, r0=spec.R0)
    assert default.A == pytest.approx(spec.A, abs=1e-6)
    assert paper.A == pytest.approx(default.A, abs=A_STEP)  # the paper grid's resolution
    assert paper.B == pytest.approx(default.B, rel=0.05)
    assert paper.C_mid == pytest.approx(default.C_mid, rel=0.05)  # C_mid grid step is 5 %


def test_paper_A_lies_on_its_grid():
    spec = SPECS[0]
    c, y = spec.sample(trial_rng(3, 0, 0))
    a = fit_sigmoid(c, y, method="paper", r0=spec.R0).A
    assert abs(a / A_STEP - round(a / A_STEP)) < 1e-9


def test_paper_R0_comes_from_the_initial_evaluation():
    c = np.array([0.0, 0.0, 100.0, 200.0])
    y = np.array([0.30, 0.32, 0.35, 0.4])
    assert paper_r0(c, y, None) == pytest.approx(0.31)
    assert paper_r0(c[2:], y[2:], None) == pytest.approx(0.35)
    assert paper_r0(c, y, 0.2) == 0.2


def test_paper_method_drops_burn_in_and_reports_intervals():
    spec = SPECS[0]
    c, y = spec.sample(trial_rng(3, 0, 1))
    f = fit_sigmoid(c, y, method="paper", burn_in=1500.0)
    assert f.method == "paper" and f.compute_range[0] >= 1500.0 and "R0" in f.fixed
    assert f.R0 == pytest.approx(y[0])  # the compute-0 evaluation
    lo, hi = f.intervals["A"]
    assert lo < f.A < hi and abs(f.A - spec.A) < 0.035
