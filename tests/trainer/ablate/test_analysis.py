"""The study's fits, margin, flags and fixed-A refit on run folders with known curves.

The run folders hold validation lines drawn from sigmoids with known A and B (the trainer's
`metrics.jsonl` keys), so the test can say what the analysis must find: a variant whose A is lower
by more than the baseline's seed spread is flagged; a variant with the same A but a smaller B is not
flagged, joins the fixed-A refit and gets the smaller B there; a falling curve's failed fit is recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scalerl.trainer.ablate.analysis import PAPER_MARGIN, analyze, margin_for
from scalerl.trainer.ablate.report import write_report
from scalerl.trainer.ablate.study import Manifest, RunEntry, StudySpec
from scalerl.trainer.ablate.variants import Variant

BUDGET = 100.0
R0 = 0.2


def _curve(a: float, b: float, c_mid: float, noise: float, rng: np.random.Generator) -> list[tuple[float, float]]:
    cs = np.linspace(0, BUDGET, 21)
    ys = R0 + (a - R0) / (1 + (c_mid / np.maximum(cs, 1e-9)) ** b)
    ys[0] = R0
    return [(float(c), float(np.clip(y + rng.normal(0, noise) * (c > 0), 0, 1))) for c, y in zip(cs, ys)]


def _write_run(folder: Path, points: list[tuple[float, float]]) -> None:
    folder.mkdir(parents=True)
    lines = [json.dumps({"kind": "validation", "step": i, "compute_device_s": c,
                         "val": {"math": {"pass_rate": y, "n": 1024}}}) for i, (c, y) in enumerate(points)]
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "summary.json").write_text("{}")


def _study(tmp_path: Path, curves: dict[str, list[tuple[float, float, float]]]) -> Manifest:
    rng = np.random.default_rng(0)
    runs = []
    for name, seeds in curves.items():
        for seed, (a, b, c_mid) in enumerate(seeds):
            folder = f"runs/{name}/seed{seed}"
            _write_run(tmp_path / folder, _curve(a, b, c_mid, 0.003, rng))
            runs.append(RunEntry(variant=name, seed=seed, folder=folder, overrides=[], status="finished"))
    spec = StudySpec(variants=list(curves), seeds=2, budget=BUDGET, out=str(tmp_path))
    return Manifest(study=spec, variants=[Variant(name=n, description=n) for n in curves], runs=runs)


def test_flags_lower_asymptote_and_refits_equal_asymptotes(tmp_path: Path) -> None:
    manifest = _study(tmp_path, {
        "baseline": [(0.60, 2.0, 30.0), (0.62, 2.0, 30.0)],
        "slow": [(0.61, 1.0, 30.0), (0.61, 1.0, 30.0)],   # same A, half the B
        "low": [(0.40, 2.0, 30.0), (0.41, 2.0, 30.0)],    # A lower by 0.2
        "falls": [(0.05, 2.0, 30.0), (0.05, 2.0, 30.0)],  # no gain: no fit
    })
    result = analyze(manifest, tmp_path, ["math"])
    rows = {v.variant: v for v in result.report.variants}
    (domain,) = result.report.domains
    assert domain.R0 == R0
    assert abs(rows["baseline"].A - 0.61) < 0.03
    assert rows["low"].beyond_margin is True and rows["low"].dA < -0.1
    assert rows["slow"].beyond_margin is False
    assert domain.fixed_A is not None and set(domain.fixed_A_variants) == {"baseline", "slow"}
    assert rows["slow"].B_fixed < rows["baseline"].B_fixed
    assert rows["slow"].dB_fixed < 0
    assert rows["low"].B_fixed is None  # outside the margin: not refitted
    falls = [r for r in result.report.runs if r.variant == "falls"]
    assert all(r.fit is None and r.error for r in falls)
    for rec in result.report.runs:
        if rec.fit is not None:
            assert R0 <= rec.fit["A"] <= 1.0
            assert rec.extrapolation_error is not None and abs(rec.extrapolation_error) < 0.1
    paths = write_report(manifest, result, tmp_path)
    assert paths["heldout"].stat().st_size > 0 and paths["fixed_a"].stat().st_size > 0
    report = json.loads(paths["report_json"].read_text())
    assert report["analysis"]["domains"][0]["fixed_A"] == domain.fixed_A
    md = paths["report_md"].read_text()
    assert "| low |" in md
    res = domain.resolution  # from the two baseline seeds, stated before the comparisons
    assert res is not None and res.from_baseline_runs == 2 and res.A is not None and res.A > 0
    assert md.index("Resolution at 2 standard errors with 2 seeds") < md.index("| low |")
    low_row = next(line for line in md.splitlines() if line.startswith("| low |"))
    assert low_row.count("**yes**") >= 2  # beyond the margin and above the resolution on A
    assert rows["low"].d_late_pass_rate is not None and rows["low"].d_late_pass_rate < -0.1
    assert "Extrapolation check (fit on compute" in md and "| determined? |" in md
    assert "| falls | 0 | math | – | – | no fit (" in md
    assert rows["low"].dA_se is not None and 0 < rows["low"].dA_se < abs(rows["low"].dA)
    assert rows["baseline"].dA_se is None  # no difference from itself
    assert rows["falls"].reached_target == 0 and rows["falls"].d_compute_to_target is None
    assert "Differences from the baseline" in md


def test_a_later_curve_costs_more_compute_to_the_target(tmp_path: Path) -> None:
    """Same A and B, midpoint 1.5x later: the compute to the target pass rate grows by about half."""
    manifest = _study(tmp_path, {
        "baseline": [(0.60, 2.0, 30.0), (0.60, 2.0, 31.0)],
        "later": [(0.60, 2.0, 45.0), (0.60, 2.0, 46.5)],
    })
    result = analyze(manifest, tmp_path, ["math"])
    rows = {v.variant: v for v in result.report.variants}
    base, later = rows["baseline"], rows["later"]
    assert base.reached_target == later.reached_target == 2
    assert later.d_compute_to_target is not None and later.d_compute_to_target_se is not None
    assert 0.3 * base.compute_to_target < later.d_compute_to_target < 0.7 * base.compute_to_target
    assert later.d_compute_to_target > 2 * later.d_compute_to_target_se
    assert abs(later.dA) < 0.03
    md = write_report(manifest, result, tmp_path)["report_md"].read_text()
    (diff_row,) = [line for line in md.splitlines() if line.startswith("| later |") and "(2/2)" in line]
    assert diff_row.endswith("| **yes** |")  # compute to target: beyond the resolution and 2 SE


def test_a_stays_within_pass_rate_bounds_when_data_stop_early(tmp_path: Path) -> None:
    """A curve still rising at the end of the fit window: unbounded, A would run past 1."""
    manifest = _study(tmp_path, {"baseline": [(1.0, 1.5, 400.0)]})
    result = analyze(manifest, tmp_path, ["math"])
    (rec,) = result.report.runs
    assert rec.fit is not None and rec.fit["A"] <= 1.0


def test_margin_comes_from_baseline_spread_with_the_paper_floor() -> None:
    assert margin_for([0.5])[0] == PAPER_MARGIN
    assert margin_for([0.50, 0.51])[0] == PAPER_MARGIN
    margin, source = margin_for([0.40, 0.50, 0.46])
    assert abs(margin - 0.05) < 1e-12 and "3 baseline seeds" in source
