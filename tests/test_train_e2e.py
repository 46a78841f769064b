"""The CPU default, shortened, end to end: tiny model, cached warm start, real verifiers and sandbox.

One run (module fixture) feeds several one-property tests: the ledger holds both domains' attempts,
curves are written, no trained token is older than k steps, and (under `slow`, not reliable at this
length) held-out math rises. The batch reward is not asserted to rise: no-positive resampling retires
the prompts the policy solves, so the training batches get harder by design (measured: math batch
reward 0.71 -> 0.33 over 80 steps while held-out math went 0.365 -> 0.380). The warm start is cached under the user's cache folder, so only the first run on
a machine pays for it. The full-length default is under `slow`.
"""

from __future__ import annotations

import json

import duckdb
import pytest

from scalerl_env.config import load_config
from trainer.run_log import read_metrics
from trainer.train_config import TrainConfig

K = 4
P, STEPS = 32, 80
SHORT = [
    f"pipeline.max_steps={STEPS}", f"pipeline.k={K}", f"pipeline.prompts_per_step={P}", "pipeline.max_time_s=null",
    "validation.every_steps=40", "validation.min_evaluations_per_domain=1024", "checkpoint.every_steps=40",
    "logging.progress=lines",
]


# About 2-3 minutes on an idle 2-core machine once the warm start is cached; far longer when the cores
# are shared, hence the generous per-test timeout (the fixture's run counts against its first test).
pytestmark = pytest.mark.timeout(2400)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    from trainer.pipeline import train

    out = tmp_path_factory.mktemp("e2e") / "run"
    summary = train(load_config(TrainConfig, None, SHORT), out)
    return out, summary


@pytest.mark.slow  # measured 0.365 -> 0.406 (step 40) -> 0.380 (step 80): within noise at this length
def test_heldout_pass_rate_rises_on_math_and_is_measured_on_code(short_run):
    """Held-out prompts are disjoint from training. Math rises; level-0 code has only 90 distinct
    prompts and the tiny model memorizes its 68 training functions instead of learning the rule, so
    its held-out rate is measured and logged but does not rise in a short run (see docs/train.md)."""
    out, summary = short_run
    vals = read_metrics(out / "metrics.jsonl", "validation")
    assert [v["step"] for v in vals] == [0, 40, 80]
    first, last = vals[0]["val"]["math"]["pass_rate"], vals[-1]["val"]["math"]["pass_rate"]
    assert 0.0 < first < 0.9, "the warm start must leave room to learn"
    assert last > first + 0.02, f"math: held-out pass rate {first:.3f} -> {last:.3f}"
    assert summary["heldout_pass_rate"]["math"] == {"first": first, "last": last}
    assert all(v["val"]["code"]["n"] >= 1024 for v in vals)


def test_ledger_holds_both_domains(short_run):
    out, _ = short_run
    with duckdb.connect(str(out / "ledger.duckdb"), read_only=True) as con:
        rows = dict(con.execute("SELECT domain, count(*) FROM attempts GROUP BY domain").fetchall())
        per_step = con.execute("SELECT step, count(*) FROM attempts GROUP BY step ORDER BY step").fetchall()
    assert rows.get("math", 0) > 0 and rows.get("code", 0) > 0
    assert [s for s, _ in per_step] == list(range(1, STEPS + 1))
    assert {n for _, n in per_step} == {P * 8}


def test_lag_bound_holds_in_metrics(short_run):
    out, _ = short_run
    steps = read_metrics(out / "metrics.jsonl", "step")
    lags = [r["lag/max"] for r in steps if r["lag/max"] is not None]
    assert lags and max(lags) <= K
    assert max(lags) >= 1, "with k > 0 the pipeline should actually run ahead"


def test_metrics_and_curves_are_written(short_run):
    out, _ = short_run
    step = read_metrics(out / "metrics.jsonl", "step")[-1]
    for key in ("policy_version", "time", "reward/math", "pass_rate/code", "effective_batch_fraction",
                "zero_variance_fraction", "retired_count", "truncation_rate", "lag/mean", "clip_frac",
                "tokens_per_s", "compute_device_s"):
        assert key in step, key
    assert (out / "config.yaml").exists() and (out / "summary.json").exists()
    for domain in ("math", "code"):
        curve = json.loads((out / "curves" / f"{domain}.json").read_text())
        assert len(curve["pass_rate"]) == 3 and ("fit" in curve or "fit_error" in curve)
    assert (out / "curves" / "pass_rate.png").stat().st_size > 1000


@pytest.mark.slow
def test_cpu_default_full_length_learns_in_both_domains(tmp_path):
    """What `make demo` runs (the TrainConfig defaults), end to end."""
    from trainer.pipeline import train

    summary = train(TrainConfig(), tmp_path / "run")
    rates = summary["heldout_pass_rate"]["math"]
    assert rates["last"] > rates["first"] + 0.05, f"math: {rates}"
    # held-out code is logged, not asserted: see docs/train.md ("Held-out code")
