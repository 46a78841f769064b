"""The dashboard's running false-negative estimate: per domain, the second opinion's accepts over the
negatives it re-checked, summed from the first step (`scalerl.env.dashboard.readers.second_opinion_series`),
on a run folder written by the trainer's own `RunLog`."""

from __future__ import annotations

from fastapi.testclient import TestClient
from scalerl.trainer.config.train import LoggingConfig
from scalerl.trainer.run.log import RunLog

# (math checked, math accepts) per step; step 3 trains code only, whose second judge never ran.
MATH = {1: (0, 0), 2: (4, 1), 3: None, 4: (4, 3)}


def test_the_overview_charts_the_running_estimate_per_domain(tmp_path) -> None:
    from scalerl.trainer.commands.dash import build_dash_app

    run = tmp_path / "run"
    run.mkdir()
    log = RunLog(run, LoggingConfig(progress="lines"), total_steps=4, config_dict={})
    for step, counts in MATH.items():
        rec = {"step": step, "policy_version": step, "reward/mean": 0.5,
               "second_opinion/code/checked": 0.0, "second_opinion/code/accepts": 0.0,
               "second_opinion/code/fn_rate": None}
        if counts is not None:
            checked, accepts = counts
            rec.update({"second_opinion/math/checked": float(checked), "second_opinion/math/accepts": float(accepts),
                        "second_opinion/math/fn_rate": accepts / checked if checked else None})
        log.write("step", rec)
    log.close()
    with TestClient(build_dash_app(run, [])) as client:
        series = {s["name"]: s for s in client.get("/api/dash/overview").json()["second_opinion"]}
    assert set(series) == {"code", "math"}
    assert series["math"]["x"] == [1.0, 2.0, 3.0, 4.0]
    assert series["math"]["y"] == [None, 0.25, 0.25, 0.5]  # (1 + 3) / (4 + 4) by step 4, not the mean of rates
    assert series["code"]["y"] == [None] * 4
