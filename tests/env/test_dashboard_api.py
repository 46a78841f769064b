"""The dashboard's JSON routes (`scalerl.env.dashboard`) on real run folders, through FastAPI's TestClient.

Run folders: one short CPU run of the real trainer (`make_run`, shared with the browser test: it is made
once per test session), and a synthetic "variant" written with the trainer's own writers (`RunLog`,
`write_curves`) whose held-out curve is a sigmoid, so the fit, its band and the extrapolation are there.
A 200k-attempt ledger checks that the ledger routes stay bounded. The reward server serves the same
pages over its own ledger (`create_app`).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

STEPS, EVERY = 6, 2
SHORT = [f"pipeline.max_steps={STEPS}", "pipeline.k=2", "pipeline.prompts_per_step=8", "pipeline.max_time_s=null",
         f"validation.every_steps={EVERY}", "validation.min_evaluations_per_domain=32",
         f"checkpoint.every_steps={STEPS}", "logging.progress=lines"]
BIG_ATTEMPTS, BIG_PROMPTS = 200_000, 2_000
SANDBOX_PROGRAM = "```python\nprint('partial answer: 41')\nraise ValueError('boom on line 2')\n```"
SANDBOX_TESTS = {"kind": "stdio", "cases": [{"input": "", "output": "42\n"}]}
STATIC = Path(__file__).resolve().parents[2] / "scalerl_env" / "dashboard" / "static"
DASH_ROUTES = {"/api/dash/info", "/api/dash/overview", "/api/dash/ledger", "/api/dash/prompts",
               "/api/dash/prompts/{prompt_id}", "/api/dash/rollouts", "/api/dash/curriculum", "/api/dash/compare"}

pytestmark = pytest.mark.timeout(1200)


def make_run(tmp_path_factory) -> Path:
    """A short real CPU run (tiny model, real verifiers and sandbox), made once per session (~1 min)."""
    out = tmp_path_factory.getbasetemp() / "dash-real-run"
    if not (out / "summary.json").exists():
        from scalerl.env.contracts.config_loader import load_config
        from scalerl.trainer.config.train import TrainConfig
        from scalerl.trainer.run.loop import train

        shutil.rmtree(out, ignore_errors=True)
        train(load_config(TrainConfig, None, SHORT), out)
    return out


def make_variant(tmp_path_factory) -> Path:
    """A run folder written by the trainer's writers: 20 evaluations on a sigmoid, step lines, curves/."""
    from scalerl.trainer.config.train import LoggingConfig
    from scalerl.trainer.fit.curves import write_curves
    from scalerl.trainer.fit.synthetic import CurveSpec
    from scalerl.trainer.run.log import RunLog

    out = tmp_path_factory.getbasetemp() / "dash-variant"
    if (out / "curves" / "math.json").exists():
        return out
    out.mkdir(exist_ok=True)
    spec = CurveSpec(name="variant", A=0.7, B=1.6, C_mid=40.0, C_end=120.0, R0=0.1)
    cs = np.linspace(0.0, 120.0, 21)
    ys = spec.truth(cs) + np.random.default_rng(0).normal(0, 0.005, cs.size)
    log = RunLog(out, LoggingConfig(progress="lines"), total_steps=40, config_dict={})
    for i, (c, y) in enumerate(zip(cs, ys)):
        val = {"math": {"pass_rate": float(y), "n": 64.0}}
        log.write("validation", {"step": 2 * i, "policy_version": 2 * i, "compute_device_s": float(c), "val": val})
        if i < 20:
            for s in (2 * i + 1, 2 * i + 2):
                log.write("step", {"step": s, "policy_version": s, "reward/mean": float(y), "reward/math": float(y),
                                   "compute_device_s": float(c), "truncation_rate": 0.0,
                                   "curriculum/weight/math": 1.0, "draws/math/generator": 8.0})
    log.close()
    write_curves(out, ["math"])
    write_code_rollout(out)
    return out


def write_code_rollout(out: Path) -> dict:
    """One code line in `out/rollouts.jsonl`, written by the trainer's `RolloutLog` from the real code verifier's
    verdict on a program that prints, then fails: its details carry the sandbox's stdout and stderr."""
    from scalerl.env.contracts.records import ProblemRecord, VerifyItem
    from scalerl.trainer.config.data import RolloutLogConfig
    from scalerl.trainer.rollout.sample_log import RolloutLog
    from scalerl.verifiers.code.judge import CodeVerifier

    from tests.trainer.rollout.test_sample_log import group

    with CodeVerifier() as v:
        (verdict,) = v.verify_many([VerifyItem(id="c", domain="code", completion=SANDBOX_PROGRAM, tests=SANDBOX_TESTS)])
    problem = ProblemRecord(prompt_id="code-sandbox-0", domain="code", source="t", tests=SANDBOX_TESTS,
                            prompt=[{"role": "user", "content": "Print 42."}])
    RolloutLog(out, RolloutLogConfig()).observe_step(1, [group(problem, SANDBOX_PROGRAM, verdict)])
    return verdict.details


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory)


@pytest.fixture(scope="module")
def variant(tmp_path_factory) -> Path:
    return make_variant(tmp_path_factory)


@pytest.fixture(scope="module")
def client(run, variant):
    from scalerl.trainer.commands.dash import build_dash_app

    with TestClient(build_dash_app(run, [variant])) as c:
        yield c


def ledger_sql(run: Path):
    """A second read-only connection beside the dashboard's (DuckDB wants the same configuration)."""
    import duckdb

    return duckdb.connect(str(run / "ledger.duckdb"), read_only=True, config={"enable_external_access": False})


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_overview_has_every_step_and_evaluation(client, run):
    metrics = lines(run / "metrics.jsonl")
    steps = [r for r in metrics if r["kind"] == "step"]
    vals = [r for r in metrics if r["kind"] == "validation"]
    d = client.get("/api/dash/overview").json()
    assert (d["steps"], d["validations"]) == (STEPS, STEPS // EVERY + 1)
    assert d["domains"] == ["code", "math"]
    for curve in d["curves"]:
        assert curve["points"]["y"] == [v["val"][curve["domain"]]["pass_rate"] for v in vals]
        assert curve["points"]["x"] == [v["compute_device_s"] for v in vals]
        assert curve["fit"] is None and curve["fit_error"]  # 3 points with compute > 0 cannot be fitted
    reward = next(s for s in d["step_series"] if s["name"] == "reward/mean")
    assert reward["x"] == [float(r["step"]) for r in steps] and reward["y"] == [r["reward/mean"] for r in steps]
    names = {s["name"] for s in d["step_series"]}
    assert {"effective_batch_fraction", "truncation_rate", "tokens_per_s", "format_failure_rate/code"} <= names
    trained = {k.split("/")[1] for r in steps for k in r if k.startswith("groups/")}
    assert {s["name"] for s in d["second_opinion"]} == trained  # the running false-negative estimate per domain


def test_the_fitted_band_is_trainer_fits_band(client, variant):
    """The curve and band the page draws equal `SigmoidFit.predict` / `band` of the fit the trainer wrote."""
    from scalerl.env.contracts.sigmoid import SigmoidFit
    from scalerl.trainer.commands.dash import build_dash_app

    with TestClient(build_dash_app(variant)) as c:
        (curve,) = c.get("/api/dash/overview").json()["curves"]
    fit = SigmoidFit(**json.loads((variant / "curves" / "math.json").read_text())["fit"])
    xs = np.array(curve["fit"]["x"])
    lo, hi = fit.band(xs)
    assert np.allclose(curve["fit"]["y"], fit.predict(xs)) and np.allclose(curve["band_low"], lo)
    assert np.allclose(curve["band_high"], hi)
    assert curve["fit_max_compute"] == fit.compute_range[1] and xs.max() == pytest.approx(4 * fit.compute_range[1])
    assert len(curve["points"]["x"]) == 21 and abs(curve["asymptote"] - 0.7) < 0.05


def test_ledger_counts_match_the_ledger(client, run):
    d = client.get("/api/dash/ledger").json()
    with ledger_sql(run) as con:
        per_domain = dict(con.execute("SELECT domain, count(*) FROM attempts GROUP BY 1").fetchall())
        prompts = dict(con.execute("SELECT domain, count(*) FROM problems GROUP BY 1").fetchall())
        last_step = con.execute("SELECT max(step) FROM attempts").fetchone()[0]
    assert d["available"] and d["attempts"] == sum(per_domain.values())
    assert {c["domain"]: c["attempts"] for c in d["counts"]} == per_domain
    assert {c["domain"]: c["prompts"] for c in d["counts"]} == prompts
    last = {h["domain"]: sum(h["counts"]) for h in d["histograms"] if h["step"] == last_step}
    drawn = {c["domain"]: c["prompts"] - c["never_drawn"] for c in d["counts"]}
    assert last == drawn  # at the last step every drawn prompt is in one bin


def test_prompt_search_and_history(client, run):
    with ledger_sql(run) as con:
        pid, n = con.execute("SELECT prompt_id, count(*) FROM attempts GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1"
                             ).fetchone()
    hits = client.get("/api/dash/prompts", params={"q": pid}).json()
    assert [(h["prompt_id"], h["attempts"]) for h in hits] == [(pid, n)]
    hist = client.get(f"/api/dash/prompts/{pid}").json()
    assert hist["attempts"] == n == sum(s["attempts"] for s in hist["steps"])
    assert client.get("/api/dash/prompts/nope").status_code == 404
    assert client.get("/api/dash/prompts", params={"q": "' OR 1=1 --"}).json() == []


def test_rollout_filters_narrow_and_pages_are_bounded(client, run):
    rows = lines(run / "rollouts.jsonl")
    every = client.get("/api/dash/rollouts", params={"limit": 200}).json()
    assert every["total"] == len(rows) and every["statuses"] == sorted({r["status"] for r in rows})
    code = [r for r in rows if r["domain"] == "code" and r["kind"] == "train" and r["step"] == 2]
    page = client.get("/api/dash/rollouts", params={"domain": "code", "kind": "train", "step": 2}).json()
    assert page["total"] == len(code) > 0
    assert [r["completion"] for r in page["rows"]] == [r["completion"] for r in code][:50]
    assert all(r["prompt"] for r in page["rows"])  # the prompt's text, from the ledger
    for got, want in zip(page["rows"], code):  # the verdict's reason and the sandbox's output, from the line
        assert got["stdout"] == want["details"].get("stdout_head") and got["why"], (got, want)
    second = client.get("/api/dash/rollouts", params={"offset": 3, "limit": 2}).json()["rows"]
    assert [r["completion"] for r in second] == [r["completion"] for r in rows[3:5]]
    assert client.get("/api/dash/rollouts", params={"limit": 201}).status_code == 422


def test_a_code_rollout_carries_the_sandbox_output(variant):
    from scalerl.trainer.commands.dash import build_dash_app

    (line,) = lines(variant / "rollouts.jsonl")
    with TestClient(build_dash_app(variant)) as c:
        (row,) = c.get("/api/dash/rollouts", params={"domain": "code"}).json()["rows"]
    assert row["stdout"] == line["details"]["stdout_head"] == "partial answer: 41\n"
    assert row["stderr"] == line["details"]["stderr_tail"] and "ValueError: boom on line 2" in row["stderr"]
    assert row["status"] == "wrong" and row["why"] == "0/1 tests passed; test 0: runtime_error"


def test_rollout_index_follows_a_growing_file(tmp_path):
    from scalerl.env.dashboard.rollouts import Filter, RolloutIndex

    path = tmp_path / "rollouts.jsonl"
    row = {"kind": "train", "step": 1, "prompt_id": "p", "domain": "math", "status": "correct"}
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, "step": 2})[:20])  # a line being written
    index = RolloutIndex(path)
    assert index.page(Filter(), 0, 10)[0] == 1
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, "step": 2}) + "\n")
    assert index.page(Filter(step=2), 0, 10)[0] == 1 and index.page(Filter(), 0, 10)[0] == 2


def test_curriculum_and_compare(client, run, variant):
    steps = [r for r in lines(run / "metrics.jsonl") if r["kind"] == "step"]
    cur = {s["name"]: s for s in client.get("/api/dash/curriculum").json()}
    assert "curriculum/trained_groups" in cur and any(k.startswith("draws/") for k in cur)
    assert cur["curriculum/trained_groups"]["y"] == [r["curriculum/trained_groups"] for r in steps]
    d = client.get("/api/dash/compare", params={"key": "val.math"}).json()
    assert d["runs"] == [run.name, variant.name] and d["x"] == "compute_device_s"
    assert [len(s["x"]) for s in d["series"]] == [STEPS // EVERY + 1, 21]
    assert "val.math" in d["keys"] and "reward/mean" in d["keys"]


def test_routes_are_typed_in_the_openapi_document(client):
    doc = client.get("/openapi.json").json()
    assert set(doc["paths"]) == DASH_ROUTES  # the pages and static files stay out
    for p in DASH_ROUTES:
        schema = doc["paths"][p]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert "$ref" in schema or "$ref" in schema.get("items", {}), p
    rollout = doc["components"]["schemas"]["Rollout"]["properties"]
    assert {"stdout", "stderr", "why", "details"} <= set(rollout)


def test_pages_and_assets_are_served_without_any_external_url(client):
    for page in ("/", "/dash/overview", "/dash/ledger", "/dash/rollouts", "/dash/curriculum", "/dash/compare"):
        assert client.get(page).status_code == 200
    assert client.get("/dash/nope").status_code == 404
    for asset in ("app.js", "style.css"):
        text = client.get(f"/dash-static/{asset}").text
        assert "http://" not in text and "https://" not in text
    for asset in ("vendor/uPlot.iife.min.js", "vendor/uPlot.min.css"):  # served from the package, as shipped
        got = client.get(f"/dash-static/{asset}")
        assert got.status_code == 200 and got.content == (STATIC / asset).read_bytes()
    assert client.get("/dash-static/vendor/README.md").status_code == 404  # only the files a page loads
    assert client.get("/dash-static/../routes.py").status_code == 404
    assert "innerHTML" not in client.get("/dash-static/app.js").text


def big_ledger(path: Path) -> Path:
    """A ledger of BIG_PROMPTS prompts and BIG_ATTEMPTS attempts over 100 steps (real writer)."""
    from scalerl.curriculum.ledger.store import Ledger

    from tests.support.ledger_data import problem

    if path.exists():
        return path
    per_step = BIG_ATTEMPTS // 100
    with Ledger(path) as led:
        led.upsert_problems([problem(i, "math") for i in range(BIG_PROMPTS)])
        for step in range(1, 101):
            ids = [f"math-{(step * 37 + i) % (BIG_PROMPTS - 100):03d}" for i in range(per_step)]
            status = ["correct" if (i * 7 + step) % 5 == 0 else "wrong" for i in range(per_step)]
            led.record_attempts({"prompt_id": ids, "domain": ["math"] * per_step, "step": [step] * per_step,
                                 "status": status})
    return path


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    return big_ledger(tmp_path_factory.getbasetemp() / "dash-big.duckdb")


def test_a_200k_attempt_ledger_answers_bounded_lists_quickly(big):
    from fastapi import FastAPI
    from scalerl.curriculum.ledger.store import Ledger
    from scalerl.env.dashboard.routes import DashSource, build_router

    with Ledger(big, read_only=True) as led:
        app = FastAPI()
        app.include_router(build_router(DashSource(ledger=led, ledger_label=str(big))))
        with TestClient(app) as c:
            t0 = time.perf_counter()
            d = c.get("/api/dash/ledger").json()
            elapsed = time.perf_counter() - t0
            hits = c.get("/api/dash/prompts", params={"q": "math", "limit": 50}).json()
            assert c.get("/api/dash/overview").status_code == 404  # no run folder: the page says so
    assert d["attempts"] == BIG_ATTEMPTS and d["counts"][0]["never_drawn"] == 100
    assert len(d["histograms"]) <= 12 and len(d["sources"]) <= 200 and len(hits) == 50
    assert elapsed < 20, f"ledger view took {elapsed:.1f} s"


def test_the_reward_server_serves_the_dashboard_over_its_ledger(big):
    """`scalerl-env serve --ledger L`: the same pages; the JSON routes are in its OpenAPI, the pages are not."""
    from scalerl.curriculum.ledger.store import Ledger
    from scalerl.env.server.app import create_app

    with Ledger(big, read_only=True) as led, TestClient(create_app(ledger=led)) as c:
        assert c.get("/").status_code == 200
        assert c.get("/api/dash/info").json()["run"] is None
        assert c.get("/api/dash/ledger").json()["attempts"] == BIG_ATTEMPTS
        assert c.get("/api/dash/rollouts").status_code == 404  # no run folder behind the server
        paths = set(c.get("/openapi.json").json()["paths"])
        assert DASH_ROUTES <= paths and not [p for p in paths if p == "/" or p.startswith("/dash")]


def test_a_live_run_reads_the_latest_checkpoints_ledger(run, tmp_path):
    """While the trainer holds ledger.duckdb (here: this process's writer), the checkpoint's copy is read."""
    from scalerl.curriculum.ledger.store import Ledger
    from scalerl.env.dashboard.routes import DashSource

    live = tmp_path / "live"
    shutil.copytree(run, live, ignore=shutil.ignore_patterns("*.safetensors", "*.pt"))
    with Ledger(live / "ledger.duckdb"):
        src = DashSource(run=live)
        led, where = src.ledger()
        assert led is not None and "checkpoint" in where
        assert led.query("SELECT count(*) FROM attempts").rows[0][0] > 0
        src.close()


def saturating_run(root: Path) -> Path:
    """A run folder whose held-out pass rate climbs past 0.9 within its evaluations, written by the trainer's
    writers: its fit puts A at the pass-rate bound 1 (with the warning `scalerl fit` prints) and its band
    runs past 1."""
    from scalerl.trainer.config.train import LoggingConfig
    from scalerl.trainer.fit.curves import write_curves
    from scalerl.trainer.run.log import RunLog

    out = root / "saturating"
    out.mkdir()
    cs = np.linspace(0.0, 60.0, 13)
    ys = np.clip(0.1 + cs / (cs + 6.0) + np.random.default_rng(3).normal(0, 0.02, cs.size), 0, 1)
    log = RunLog(out, LoggingConfig(progress="lines"), total_steps=13, config_dict={})
    for i, (c, y) in enumerate(zip(cs, ys)):
        log.write("validation", {"step": i, "policy_version": i, "compute_device_s": float(c),
                                 "val": {"math": {"pass_rate": float(y), "n": 64.0}}})
    log.close()
    write_curves(out, ["math"])
    return out


def test_pass_rate_axis_stops_at_1_the_compute_axis_has_its_unit_and_the_fit_warns(tmp_path):
    """A fit at A = 1: the axis ends at 1 although the band runs past it, the compute axis names its unit,
    and the page carries the fit's own warnings, the lines `scalerl fit` prints for the same file."""
    from scalerl.env.contracts.sigmoid import COMPUTE_AXES
    from scalerl.trainer.cli import build_app
    from scalerl.trainer.commands.dash import build_dash_app
    from typer.testing import CliRunner

    run = saturating_run(tmp_path)
    with TestClient(build_dash_app(run)) as c:
        (curve,) = c.get("/api/dash/overview").json()["curves"]
    assert curve["asymptote"] == pytest.approx(1.0) and max(curve["band_high"]) > 1.0
    assert curve["y_range"] == [0.0, 1.0]
    assert curve["x_label"] == COMPUTE_AXES["device_s"][2] == "compute (device-seconds)"
    assert any("sits at its bound 1" in w for w in curve["warnings"])
    printed = CliRunner().invoke(build_app(), ["fit", "--metrics", str(run / "metrics.jsonl"), "--compute", "device_s"])
    assert printed.exit_code == 0, printed.output
    assert [f"  warning: {w}" for w in curve["warnings"]] == [x for x in printed.output.splitlines() if "warning:" in x]


def test_pass_rate_axis_follows_the_data_below_1(client, variant):
    from scalerl.env.dashboard.readers import pass_rate_range

    (curve,) = [c for c in client.get("/api/dash/overview").json()["curves"] if c["domain"] == "math"]
    top = max([y for y in curve["points"]["y"] if y is not None])
    assert curve["y_range"][0] == 0.0 and top <= curve["y_range"][1] <= min(1.0, top + 0.1)
    assert pass_rate_range([0.31, None, 1.2062]) == (0.0, 1.0) and pass_rate_range([0.31, 0.4]) == (0.0, 0.4)
    compare = client.get("/api/dash/compare", params={"key": "val.math"}).json()
    assert compare["x_label"] == "compute (device-seconds)" and compare["y_range"][1] <= 1.0
    assert client.get("/api/dash/compare", params={"key": "reward/mean"}).json()["x_label"] == "step"


def group_ledger(path: Path, correct_per_prompt: list[int], samples: int = 8):
    """A ledger with one group of `samples` attempts per prompt at step 1, `correct_per_prompt[i]` of them correct."""
    from scalerl.curriculum.ledger.store import Ledger

    from tests.support.ledger_data import problem

    led = Ledger(path)
    led.upsert_problems([problem(i, "math") for i in range(len(correct_per_prompt))])
    rows = [{"prompt_id": f"math-{i:03d}", "domain": "math", "step": 1, "sample_index": j,
             "status": "correct" if j < k else "wrong"}
            for i, k in enumerate(correct_per_prompt) for j in range(samples)]
    led.record_attempts(rows)
    return led


def test_histogram_bins_are_the_rates_a_group_can_have(tmp_path):
    """8 samples per prompt: the bins are 0/8 ... 8/8, and a prompt with 4 of 8 correct is in 4/8 (with bins
    of width 0.1 the 0.4-0.5 bin could never be filled: 4/8 fell in 0.5-0.6)."""
    from scalerl.env.dashboard import ledger_view
    from scalerl.env.dashboard.models import RunSettings

    with group_ledger(tmp_path / "l.duckdb", list(range(9))) as led:
        given = ledger_view.view(led, settings=RunSettings(samples_per_prompt=8))
        inferred = ledger_view.view(led)  # no run folder: the ledger's own group size
    for d in (given, inferred):
        assert d.bins == [f"{k}/8" for k in range(9)]
        assert [(h.domain, h.step, h.counts) for h in d.histograms] == [("math", 1, [1] * 9)]


def test_benched_counts_only_when_the_run_benches(client, run, tmp_path):
    from scalerl.env.dashboard import ledger_view
    from scalerl.env.dashboard.readers import run_settings

    assert run_settings(run).bench is False and run_settings(run).samples_per_prompt == 8
    d = client.get("/api/dash/ledger").json()
    assert d["counts"] and all(c["benched"] is None for c in d["counts"])
    assert d["bins"] == [f"{k}/8" for k in range(9)]
    for bench in ({"bench": {"last_k": 2, "hard_at": 0.0}}, {"stages": [{"drop_above": 0.9}]}):
        (tmp_path / "config.yaml").write_text(json.dumps({"pipeline": {"samples_per_prompt": 4}, "curriculum": bench}))
        settings = run_settings(tmp_path)
        assert settings.bench and settings.samples_per_prompt == 4
        with group_ledger(tmp_path / "l.duckdb", [0, 4]) as led:
            assert [c.benched for c in ledger_view.view(led, settings=settings).counts] == [0]
        (tmp_path / "l.duckdb").unlink()


def test_the_vendored_chart_library_is_the_noted_release_and_ships_in_the_wheel():
    """uPlot's files match the versions and hashes in vendor/README.md, its licence is there, the pages load it
    from this server, pyproject's package-data ships it, and no hand-drawn SVG chart code is left."""
    import hashlib
    import re

    from scalerl.env.contracts.paths import REPO

    from tests.project.test_packaging import pyproject

    static = REPO / "scalerl_env" / "dashboard" / "static"
    table_row = re.compile(r"^\| `([^`]+)` \| `[^`]+` \| `([0-9a-f]{64})` \|$", re.M)
    noted = dict(table_row.findall((static / "vendor/README.md").read_text()))
    assert set(noted) == {"uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE"}
    for name, digest in noted.items():
        assert hashlib.sha256((static / "vendor" / name).read_bytes()).hexdigest() == digest, name
    assert "(v1.6.32)" in (static / "vendor/uPlot.iife.min.js").read_text()[:200]
    assert "MIT License" in (static / "vendor/uPlot.LICENSE").read_text()
    html = (static / "index.html").read_text()
    assert re.findall(r'(?:src|href)="(/dash-static/[^"]+)"', html) == [
        "/dash-static/vendor/uPlot.min.css", "/dash-static/style.css", "/dash-static/vendor/uPlot.iife.min.js",
        "/dash-static/app.js"]
    data = pyproject()["tool"]["setuptools"]["package-data"]
    assert "static/vendor/*" in data["scalerl.env.dashboard"]
    app = (static / "app.js").read_text()
    assert "new uPlot(" in app and "createElementNS" not in app and "polyline" not in app
