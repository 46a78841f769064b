"""The resolution a study states before its comparisons, and whether a fit determined A and B."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scalerl.trainer.ablate.resolution import (
    baseline_resolution,
    compute_to_target,
    difference_se,
    eval_floor,
    fit_status,
    resolvable_difference,
)


def test_compute_to_target_interpolates_the_first_crossing():
    c, r = np.array([0.0, 10.0, 20.0, 30.0]), np.array([0.2, 0.4, 0.6, 0.5])
    assert compute_to_target(c, r, 0.5) == pytest.approx(15.0)
    assert compute_to_target(c, r, 0.2) == 0.0
    assert compute_to_target(c, r, 0.7) is None


def test_resolvable_difference_is_two_standard_errors_of_a_difference_of_means():
    values = [0.50, 0.54, 0.52, 0.56]  # sd (ddof 1) = 0.02582
    sd = float(np.std(values, ddof=1))
    assert resolvable_difference(values, seeds=3) == pytest.approx(2 * sd * math.sqrt(2 / 3))
    assert resolvable_difference(values, seeds=12) == pytest.approx(resolvable_difference(values, 3) / 2)
    assert resolvable_difference([0.5], seeds=3) is None  # one seed: no spread to measure


def test_eval_floor_is_the_binomial_part():
    assert eval_floor(0.5, samples=2500, seeds=2) == pytest.approx(2 * math.sqrt(2 * 0.25 / 5000))
    assert eval_floor(None, samples=10, seeds=2) is None


def test_baseline_resolution_from_hand_made_curves():
    c = np.array([0.0, 10.0, 20.0])
    curves = [(c, np.array([0.2, 0.5, 0.6])), (c, np.array([0.2, 0.4, 0.6]))]
    res = baseline_resolution(curves, [0.7, 0.8], [0.6, 0.6], r0=0.2, seeds=2, samples=100)
    assert res.target_pass_rate == pytest.approx(0.4)  # halfway from R0 0.2 to the late mean 0.6
    reach = [20 / 3, 10.0]  # 0.4 reached at 6.67 and at 10
    assert res.compute_to_target == pytest.approx(2 * float(np.std(reach, ddof=1)))
    assert res.A == pytest.approx(2 * float(np.std([0.7, 0.8], ddof=1)))
    assert res.late_pass_rate == 0.0 and res.eval_floor == pytest.approx(2 * math.sqrt(2 * 0.24 / 200))
    never = baseline_resolution([(c, np.array([0.2, 0.25, 0.3])), *curves[:1]], [], [0.6, 0.6], 0.2, seeds=2,
                                samples=100)
    assert never.compute_to_target is None and never.A is None  # a run that never reaches the target


def test_fit_status_names_what_is_pinned():
    assert fit_status({"A": 0.8, "B": 1.2, "warnings": []}) == "A and B determined"
    pinned = {"warnings": ["A = 1 sits at its bound 1: the data do not show the curve saturating below it",
                           "B = 20 sits at its search bound: the data do not determine it; treat the fit as "
                           "unreliable"]}
    assert fit_status(pinned) == "A at a bound; B at a bound"
    assert fit_status({"warnings": ["the A interval is wider than the gain A - R0: these data do not determine A"]}) \
        == "A undetermined (interval wider than the gain)"
    assert fit_status(None) == "no fit"


def test_difference_se_uses_both_recipes_spreads():
    v, b = [0.50, 0.54, 0.52], [0.40, 0.41, 0.42, 0.43]
    expected = math.sqrt(np.var(v, ddof=1) / 3 + np.var(b, ddof=1) / 4)
    assert difference_se(v, b) == pytest.approx(expected)
    assert difference_se([0.5], b) is None  # one seed has no spread
