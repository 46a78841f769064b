"""`scalerl fit`: metrics.jsonl and CSV input, text/JSON output, the figure, and clear errors."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import typer
from scalerl.trainer.commands import fit as fit_cli
from scalerl.trainer.fit.synthetic import published_curves, trial_rng
from typer.testing import CliRunner

MATH, CODE = published_curves()[8], published_curves()[9]  # the paper's math+code run
runner = CliRunner()


@pytest.fixture(scope="module")
def app():
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Group, so the command is addressed as `fit` as under `scalerl`."""

    fit_cli.register(app)
    return app


def _curves(seed=0):
    c = np.concatenate([[0.0], np.linspace(16000 / 60, 16000, 60)])
    rng = trial_rng(seed, 0, 0)
    return c, MATH.truth(c) + rng.normal(0, 0.01, c.size), CODE.truth(c) + rng.normal(0, 0.01, c.size)


@pytest.fixture()
def metrics(tmp_path):
    """A trainer-style metrics.jsonl: training lines between validation lines every 100 steps."""
    c, ym, yc = _curves()
    path = tmp_path / "run1" / "metrics.jsonl"
    path.parent.mkdir()
    with path.open("w") as fh:
        for k, (ck, m, cd) in enumerate(zip(c, ym, yc)):
            step = 100 * k
            fh.write(json.dumps({"step": step, "loss": 0.1, "compute_device_s": ck * 3600}) + "\n")
            fh.write(json.dumps({"step": step, "compute_device_s": ck * 3600, "compute_flops": ck * 1e15,
                                 "val": {"math": {"pass_rate": m}, "code": {"pass_rate": cd}}}) + "\n")
    return path


@pytest.fixture()
def csv_file(tmp_path):
    c, ym, yc = _curves(1)
    path = tmp_path / "curve.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["gpu_hours", "math", "code"])
        w.writerows(zip(c, ym, yc))
    return path


def _run(app, *args):
    return runner.invoke(app, ["fit", *map(str, args)])


def test_csv_json_has_parameters_intervals_and_predictions(app, csv_file):
    res = _run(app, "--csv", csv_file, "--compute-col", "gpu_hours", "--reward-col", "math",
               "--predict-at", "16000,32000", "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert {"A", "B", "C_mid", "R0", "intervals", "predictions"} <= d.keys()
    assert abs(d["A"] - MATH.A) < 0.035 and d["intervals"]["A"][0] < d["A"] < d["intervals"]["A"][1]
    assert [p["compute"] for p in d["predictions"]] == [16000.0, 32000.0]
    assert all(p["lo"] < p["reward"] < p["hi"] for p in d["predictions"])


def test_metrics_domain_reads_val_pass_rate_in_device_hours(app, metrics):
    res = _run(app, "--metrics", metrics, "--domain", "code", "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["series"] == "code" and d["n_points"] == 61
    assert d["compute_range"][1] == pytest.approx(16000.0)
    assert abs(d["C_mid"] - CODE.C_mid) / CODE.C_mid < 0.3


def test_metrics_all_domains_keyed_by_series(app, metrics):
    res = _run(app, "--metrics", metrics, "--compute", "flops", "--json")
    assert res.exit_code == 0, res.output
    fits = json.loads(res.stdout)["fits"]
    assert set(fits) == {"math", "code"}
    assert fits["math"]["compute_range"][1] == pytest.approx(16000.0 * 1e15)


def test_two_runs_are_labelled_by_run_folder(app, metrics, tmp_path):
    other = tmp_path / "run2" / "metrics.jsonl"
    other.parent.mkdir()
    other.write_text(metrics.read_text())
    res = _run(app, "--metrics", metrics, "--metrics", other, "--domain", "math", "--json")
    assert res.exit_code == 0, res.output
    assert set(json.loads(res.stdout)["fits"]) == {"run1/math", "run2/math"}


def test_text_output_and_plot(app, csv_file, tmp_path):
    from matplotlib.image import imread

    out = tmp_path / "fig" / "fit.png"
    res = _run(app, "--csv", csv_file, "--compute-col", "gpu_hours", "--reward-col", "math",
               "--reward-col", "code", "--fit-until", "8000", "--predict-at", "16000", "--power-law",
               "--plot", out)
    assert res.exit_code == 0, res.output
    assert "A     = " in res.stdout and "R(16000) = " in res.stdout and "power law" in res.stdout
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = imread(out)
    assert img.shape[0] >= 600 and img.shape[1] >= 1000
    assert img[..., :3].std() > 0.05  # something was drawn


def test_fixed_a_option(app, csv_file):
    res = _run(app, "--csv", csv_file, "--compute-col", "gpu_hours", "--reward-col", "math",
               "--fixed-a", "0.6", "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["A"] == 0.6 and d["method"] == "fixed_A"


def test_bad_json_line_is_named(app, metrics):
    lines = metrics.read_text().splitlines()
    lines[2] = "{not json"
    metrics.write_text("\n".join(lines) + "\n")
    res = _run(app, "--metrics", metrics)
    assert res.exit_code == 2 and f"{metrics}:3: not valid JSON" in res.stderr


def test_missing_compute_key_is_named(app, metrics):
    lines = metrics.read_text().splitlines()
    row = json.loads(lines[3])
    del row["compute_device_s"]
    lines[3] = json.dumps(row)
    metrics.write_text("\n".join(lines) + "\n")
    res = _run(app, "--metrics", metrics)
    assert res.exit_code == 2 and f"{metrics}:4: validation line has no 'compute_device_s'" in res.stderr


def test_non_increasing_compute_in_csv_is_named(app, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("c,r\n" + "".join(f"{c},{0.3 + c / 1e5}\n" for c in [0, 100, 200, 150, 300, 400, 500, 600]))
    res = _run(app, "--csv", path, "--compute-col", "c", "--reward-col", "r")
    assert res.exit_code == 2 and f"{path}:5: compute 150 is not larger than 200" in res.stderr


def test_unfittable_series_is_named(app, tmp_path):
    path = tmp_path / "flat.csv"
    path.write_text("c,r\n" + "".join(f"{c},0.4\n" for c in range(1, 20)))
    res = _run(app, "--csv", path, "--compute-col", "c", "--reward-col", "r")
    assert res.exit_code == 2 and "r: no upward trend" in res.stderr


def test_an_unfittable_series_does_not_hide_the_others(app, tmp_path):
    path = tmp_path / "two.csv"
    path.write_text("c,flat,rising\n" + "".join(f"{c},0.4,{0.1 + 0.5 * c / (c + 5)}\n" for c in range(1, 20)))
    res = _run(app, "--csv", path, "--compute-col", "c", "--reward-col", "flat", "--reward-col", "rising",
               "--plot", tmp_path / "fig.png")
    assert res.exit_code == 0 and "flat: no upward trend" in res.stderr
    assert "rising" in res.stdout and "A " in res.stdout and (tmp_path / "fig.png").stat().st_size > 0


def test_needs_exactly_one_input(app, csv_file, metrics):
    assert _run(app).exit_code == 2
    res = _run(app, "--metrics", metrics, "--csv", csv_file, "--compute-col", "gpu_hours", "--reward-col", "math")
    assert res.exit_code == 2 and "either --metrics" in res.output


def test_registered_under_scalerl():
    from scalerl.trainer.cli import build_app

    res = runner.invoke(build_app(), ["fit", "--help"])
    assert res.exit_code == 0 and "scalerl fit --csv" in res.stdout
