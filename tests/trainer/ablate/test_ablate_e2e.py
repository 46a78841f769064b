"""`scalerl ablate` end to end on the CPU default: real trainer, verifiers and sandbox, shrunk runs.

Two variants x one seed with a small compute budget: both runs stop at the budget (wall seconds x
devices, the compute axis of every step), the loo-dapo run trains with the DAPO loss and the baseline
with CISPO from the same start and held-out set, the report and the figure are written, and a second
invocation trains nothing (the finished runs' files are untouched) and rewrites the report.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from scalerl.trainer.cli import build_app
from scalerl.trainer.run.log import read_metrics
from typer.testing import CliRunner

# The first test of a cold machine that runs the CPU default pays its warm start (~5 min on idle 2 cores).
pytestmark = pytest.mark.timeout(2400)

BUDGET = 14.0
SHRINK = ["pipeline.prompts_per_step=4", "pipeline.samples_per_prompt=4", "validation.every_steps=3",
          "checkpoint.every_steps=1000"]


def _invoke(out: Path):
    args = ["ablate", "--variants", "baseline,loo-dapo", "--seeds", "1", "--budget", str(BUDGET), "--out", str(out),
            "--eval-samples", "128", *SHRINK]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result


def test_ablate_two_variants_report_and_resume(tmp_path: Path) -> None:
    out = tmp_path / "study"
    _invoke(out)
    manifest = json.loads((out / "manifest.json").read_text())
    statuses = [(r["variant"], r["status"]) for r in manifest["runs"]]
    assert statuses == [("baseline", "finished"), ("loo-dapo", "finished")]
    losses = {}
    for run in manifest["runs"]:
        folder = out / run["folder"]
        steps = read_metrics(folder / "metrics.jsonl", "step")
        assert steps[-1]["compute_device_s"] >= BUDGET > steps[-2]["compute_device_s"]  # stopped by the budget
        cfg = yaml.safe_load((folder / "config.yaml").read_text())
        losses[run["variant"]] = cfg["loss"]["name"]
        assert cfg["pipeline"]["seed"] == 0 and cfg["pipeline"]["budget"] == BUDGET
        assert cfg["validation"]["min_evaluations_per_domain"] == 128
        vals = read_metrics(folder / "metrics.jsonl", "validation")
        assert vals[0]["compute_device_s"] == 0 and len(vals) >= 2
    assert losses == {"baseline": "cispo", "loo-dapo": "dapo"}
    report = json.loads((out / "report.json").read_text())
    analysis = report["analysis"]
    assert [d["domain"] for d in analysis["domains"]] == ["math", "code"]
    assert {(v["variant"], v["domain"]) for v in analysis["variants"]} == {
        (v, d) for v in ("baseline", "loo-dapo") for d in ("math", "code")}
    assert all((r["fit"] is None) != (r["error"] is None) for r in analysis["runs"])  # a fit or its reason
    assert (out / "figures" / "heldout.png").stat().st_size > 0
    assert "scalerl ablate --variants baseline,loo-dapo" in (out / "report.md").read_text()

    before = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/seed0/*") if p.is_file()}
    report_mtime = (out / "report.md").stat().st_mtime_ns
    _invoke(out)
    after = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/seed0/*") if p.is_file()}
    assert after == before  # nothing retrained
    assert (out / "report.md").stat().st_mtime_ns > report_mtime


def test_plan_only_runs_the_baseline_seeds_on_a_samples_budget_and_states_the_resolution(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    args = ["ablate", "--plan-only", "--variants", "baseline,loo-dapo", "--seeds", "2", "--compute", "samples",
            "--budget", "32", "--out", str(out), "--eval-samples", "64", *SHRINK, "validation.every_steps=1"]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    manifest = json.loads((out / "manifest.json").read_text())
    assert [(r["variant"], r["seed"]) for r in manifest["runs"]] == [("baseline", 0), ("baseline", 1)]
    for run in manifest["runs"]:
        steps = read_metrics(out / run["folder"] / "metrics.jsonl", "step")
        assert [s["compute_samples"] for s in steps] == [16, 32]  # 4 x 4 per step, stopped at the budget
    assert result.output.count("Resolution at 2 standard errors with 2 seeds per recipe (spreads of 2 baseline") == 2
    analysis = json.loads((out / "report.json").read_text())["analysis"]
    assert analysis["compute"] == "samples" and all(d["resolution"]["seeds"] == 2 for d in analysis["domains"])
