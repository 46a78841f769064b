"""`scalerl.trainer.fit.curves.write_curves` on a synthetic metrics.jsonl: per-domain JSON and PNG plots; a series
that cannot be fitted (flat, too short) is recorded as `fit_error` instead of ending the run."""

from __future__ import annotations

import json
import math
from pathlib import Path

from scalerl.trainer.fit.curves import write_curves

PNG = b"\x89PNG\r\n\x1a\n"


def sigmoid(c: float, a: float = 0.8, r0: float = 0.1, b: float = 1.5, c_mid: float = 400.0) -> float:
    return r0 + (a - r0) / (1 + (c_mid / c) ** b) if c > 0 else r0


def write_metrics(run_dir: Path, series: dict[str, list[float]], compute: list[float]) -> None:
    """Validation lines written by hand (with step lines between them, which the curves skip)."""
    lines = []
    for i, c in enumerate(compute):
        lines.append({"kind": "step", "step": i, "compute_device_s": c, "reward/mean": 0.5})
        lines.append({"kind": "validation", "step": i, "compute_device_s": c, "compute_flops": c * 1e9,
                      "val": {d: {"pass_rate": ys[i], "n": 64.0} for d, ys in series.items()}})
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(rec) + "\n" for rec in lines))


COMPUTE = [0.0] + [50.0 * 1.35 ** i for i in range(14)]
WIGGLE = [0.01 * math.sin(3 * i) for i in range(len(COMPUTE))]  # deterministic noise: the fit has residuals


def rising(**kw) -> list[float]:
    return [sigmoid(c, **kw) + w for c, w in zip(COMPUTE, WIGGLE)]


def test_writes_points_and_fit_per_domain_and_both_plots(tmp_path):
    write_metrics(tmp_path, {"math": rising(), "code": rising(a=0.5, r0=0.05)}, COMPUTE)
    summary = write_curves(tmp_path, ["math", "code"])
    assert set(summary) == {"math", "code"}
    for domain, ys in (("math", rising()), ("code", rising(a=0.5, r0=0.05))):
        record = json.loads((tmp_path / "curves" / f"{domain}.json").read_text())
        assert record["compute_device_s"] == COMPUTE and record["pass_rate"] == ys
        assert "fit_error" not in record and set(summary[domain]) == {"fit"}
        assert 0 <= record["fit"]["R0"] < record["fit"]["A"] <= 1.0
    assert json.loads((tmp_path / "curves" / "math.json").read_text())["fit"]["A"] > \
        json.loads((tmp_path / "curves" / "code.json").read_text())["fit"]["A"]
    for name in ("pass_rate.png", "fit.png"):
        assert (tmp_path / "curves" / name).read_bytes()[:8] == PNG


def test_a_flat_series_is_recorded_as_fit_error(tmp_path):
    write_metrics(tmp_path, {"math": rising(), "code": [0.3] * len(COMPUTE)}, COMPUTE)
    summary = write_curves(tmp_path, ["math", "code"])
    code = json.loads((tmp_path / "curves" / "code.json").read_text())
    assert "no upward trend" in code["fit_error"] and "fit" not in code
    assert code["pass_rate"] == [0.3] * len(COMPUTE)  # the points are kept
    assert summary["code"] == {"fit_error": code["fit_error"]}
    assert "fit" in summary["math"]  # the other domain is still fitted and plotted
    assert (tmp_path / "curves" / "fit.png").read_bytes()[:8] == PNG


def test_a_too_short_series_is_recorded_as_fit_error(tmp_path):
    write_metrics(tmp_path, {"math": [0.1, 0.2, 0.4]}, [0.0, 10.0, 20.0])
    summary = write_curves(tmp_path, ["math"])
    record = json.loads((tmp_path / "curves" / "math.json").read_text())
    assert "too few points" in record["fit_error"] and summary["math"] == {"fit_error": record["fit_error"]}
    assert (tmp_path / "curves" / "pass_rate.png").read_bytes()[:8] == PNG  # the raw points are always plotted
    assert not (tmp_path / "curves" / "fit.png").exists()  # no fit, no fit plot


def test_a_domain_without_validation_points_is_an_error_entry(tmp_path):
    write_metrics(tmp_path, {"math": rising()}, COMPUTE)
    summary = write_curves(tmp_path, ["math", "code"])
    assert "no validation lines" in summary["code"]["error"]
    assert not (tmp_path / "curves" / "code.json").exists()
    assert "fit" in summary["math"]
