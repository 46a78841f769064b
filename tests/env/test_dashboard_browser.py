"""The dashboard in a real browser: Debian's chromium, driven by playwright, against live servers.

Servers: `scalerl dash RUN --compare VARIANT` (a child process) over the short real CPU run and the
synthetic variant of `test_dashboard_api`, and `scalerl-env serve --ledger BIG` (the reward server, a
child process) over a 200k-attempt ledger. Each test asserts on the rendered DOM, and every page load
fails on a JavaScript error or a console error. Screenshots of each page are written to
$SCALERL_DASH_SCREENSHOTS when set (docs/dashboard/ holds the committed ones), else to a temporary folder.

The browser is found as `$SCALERL_CHROMIUM`, else `chromium` on PATH (`make test` installs Debian's
package: `make browser`); without it these tests fail, never skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.env.test_dashboard_api import BIG_ATTEMPTS, STEPS, big_ledger, ledger_sql, make_run, make_variant
from tests.support.server_harness import REPO, ServerProcess, free_port

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1200)]
PAGES = ("overview", "ledger", "rollouts", "curriculum", "compare")
MAX_LEDGER_ROWS = 300  # every table of the Ledger page is bounded (12 histogram steps x domains, 200 sources)


def chromium_path() -> str:
    found = os.environ.get("SCALERL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("the browser tests need Debian's chromium: `make browser` (part of `make test`) installs it, "
                    "or set SCALERL_CHROMIUM to a Chromium binary", pytrace=False)
    return found


class DashProcess:
    """`scalerl dash RUN --compare ...` in a child process on a free loopback port."""

    def __init__(self, run: Path, *compare: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [a for c in compare for a in ("--compare", str(c))]
        cmd = [sys.executable, "-m", "scalerl.trainer.cli", "dash", str(run), "--port", str(self.port), *args]
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if httpx.get(self.url + "/api/dash/info", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"scalerl dash did not start:\n{self.proc.stdout.read() if self.proc.stdout else ''}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_run(tmp_path_factory), make_variant(tmp_path_factory)


@pytest.fixture(scope="module")
def dash(runs):
    server = DashProcess(*runs)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def variant_dash(runs):
    """`scalerl dash VARIANT`: the fitted synthetic run, with one code rollout that carries sandbox output."""
    server = DashProcess(runs[1])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def reward_server(tmp_path_factory):
    big = big_ledger(tmp_path_factory.getbasetemp() / "dash-big.duckdb")
    server = ServerProcess("--ledger", str(big)).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    out = Path(os.environ.get("SCALERL_DASH_SCREENSHOTS") or tmp_path_factory.mktemp("dash-shots"))
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    """A fresh page whose console errors and uncaught exceptions are collected in `page.errors`, and every URL
    it requests in `page.requests`."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = ctx.new_page()
    pg.errors, pg.requests = [], []
    pg.on("request", lambda req: pg.requests.append(req.url))
    pg.on("console", lambda msg: pg.errors.append(f"console: {msg.text}") if msg.type == "error" else None)
    pg.on("pageerror", lambda exc: pg.errors.append(f"page error: {exc}"))
    yield pg
    ctx.close()


def load(page, url: str) -> None:
    """Open `url` and wait until the page has rendered (or failed: then the test fails with the errors)."""
    page.goto(url)
    page.wait_for_selector("#main[data-state=ready], #main[data-state=error]", timeout=60_000)
    settle(page)


def settle(page) -> None:
    state = page.get_attribute("#main", "data-state")
    assert state == "ready" and not page.errors, f"{page.url}: state {state}, errors {page.errors}"


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_every_page_renders_without_errors_and_is_photographed(page, dash, reward_server, shots):
    for name in PAGES:
        load(page, f"{dash.url}/dash/{name}")
        assert page.locator("nav a.active").get_attribute("data-page") == name
        page.screenshot(path=str(shots / f"{name}.png"), full_page=name != "rollouts")
    load(page, f"{reward_server.url}/dash/ledger")
    page.screenshot(path=str(shots / "server-ledger.png"), full_page=True)
    load(page, f"{reward_server.url}/")
    assert page.locator("#no-run").count() == 1  # no run folder behind the reward server: said, not an error
    assert "/dash-static/vendor/uPlot.iife.min.js" in "".join(page.requests)
    outside = [u for u in page.requests if not u.startswith((dash.url, reward_server.url, "data:"))]
    assert outside == []  # the chart library and the pages come from the server itself: no network


def drawn(chart, series: int = 1) -> list:
    """The values uPlot holds for one series of a chart (its aligned data, gaps left out)."""
    return chart.evaluate(f"el => el.uplot.data[{series}].filter(v => v !== null && v !== undefined)")


def ticks(chart, axis: str) -> list[float]:
    """The tick labels the chart drew on `axis` ("x" or "y"), as numbers."""
    return [float(v) for v in (chart.get_attribute(f"data-{axis}-ticks") or "").split()]


def hover(page, chart, fraction: float) -> dict[str, str]:
    """Move the mouse over the plot at `fraction` of its width; the legend's values by series label."""
    box = chart.locator(".u-over").bounding_box()
    page.mouse.move(box["x"] + fraction * box["width"], box["y"] + box["height"] / 2)
    page.wait_for_timeout(100)
    labels = chart.locator(".u-legend .u-series th").all_inner_texts()
    return dict(zip((x.strip() for x in labels), chart.locator(".u-legend .u-series td.u-value").all_inner_texts()))


def test_overview_charts_have_the_runs_points_ticks_and_units(page, dash, runs):
    metrics = lines(runs[0] / "metrics.jsonl")
    steps = [r for r in metrics if r["kind"] == "step"]
    vals = [r for r in metrics if r["kind"] == "validation"]
    load(page, f"{dash.url}/dash/overview")
    for domain in ("math", "code"):
        chart = page.locator(f'.chart[data-title="held-out {domain}"]')
        assert drawn(chart) == [v["val"][domain]["pass_rate"] for v in vals] and len(vals) == int(
            chart.get_attribute("data-points"))
        assert len(ticks(chart, "x")) >= 3 and 3 <= len(ticks(chart, "y")) and max(ticks(chart, "y")) <= 1.0
        assert chart.evaluate("el => el.uplot.axes[0].label") == "compute (device-seconds)"
    reward = page.locator('.chart[data-title="reward/mean"]')
    assert drawn(reward) == [r["reward/mean"] for r in steps if r.get("reward/mean") is not None]
    assert ticks(reward, "x")[-1] <= STEPS and len(ticks(reward, "x")) >= 3
    assert len(steps) == STEPS
    trained = {k.split("/")[1] for r in steps for k in r if k.startswith("groups/")}
    assert page.locator("#second-opinion .chart").count() == len(trained)  # one running estimate per domain


def test_a_fitted_run_shows_its_curve_band_extrapolation_and_hover_values(page, variant_dash, shots):
    load(page, f"{variant_dash.url}/dash/overview")
    chart = page.locator('.chart[data-title="held-out math"]')
    assert len(drawn(chart)) == 21 and len(drawn(chart, 2)) == 80  # the points; the fitted curve
    assert chart.evaluate("el => el.uplot.bands.length") == 1 and len(drawn(chart, 3)) == len(drawn(chart, 4)) == 80
    assert float(chart.get_attribute("data-extrapolated-after")) == 120.0
    assert max(ticks(chart, "y")) <= 1.0 and len(ticks(chart, "x")) >= 3
    empty = hover(page, chart, 0.0)
    values = hover(page, chart, 0.2)  # the cursor's nearest evaluation and the curve there
    assert float(values["math"]) > 0 and float(values["math fit"]) > 0 and values != empty, values
    page.locator("#heldout").screenshot(path=str(shots / "overview-fit.png"))
    load(page, f"{variant_dash.url}/dash/overview?logx=1")
    chart = page.locator('.chart[data-title="held-out math"]')
    assert page.locator("#log-x").is_checked() and chart.evaluate("el => el.uplot.scales.x.distr") == 3
    assert len(drawn(chart)) == 20  # the evaluation at compute 0 has no place on a log axis
    hover(page, chart, 0.5)
    page.locator("#heldout").screenshot(path=str(shots / "overview-fit-log.png"))


def test_a_code_rollout_shows_the_sandbox_output(page, variant_dash, runs, shots):
    (line,) = lines(runs[1] / "rollouts.jsonl")
    load(page, f"{variant_dash.url}/dash/rollouts?domain=code")
    row = page.locator("tr.rollout")
    assert row.count() == 1 and row.get_attribute("data-status") == "wrong"
    assert row.locator(".sandbox pre.stdout").inner_text().strip() == line["details"]["stdout_head"].strip()
    stderr = row.locator(".sandbox pre.stderr").inner_text().strip()
    assert stderr == line["details"]["stderr_tail"].strip() and "ValueError: boom on line 2" in stderr
    assert row.locator(".why").inner_text() == "0/1 tests passed; test 0: runtime_error"
    row.screenshot(path=str(shots / "rollouts-code.png"))


def test_prompt_search_finds_a_prompt_and_shows_its_attempts(page, dash, runs, shots):
    with ledger_sql(runs[0]) as con:
        pid, n = con.execute("SELECT prompt_id, count(*) FROM attempts GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1"
                             ).fetchone()
        total = con.execute("SELECT count(*) FROM attempts").fetchone()[0]
    load(page, f"{dash.url}/dash/ledger")
    assert page.locator("#ledger-attempts").inner_text() == str(total)
    heads = page.locator("#ledger-hist th").all_inner_texts()
    assert heads == ["domain", "step"] + [f"{k}/8" for k in range(9)]  # the rates a group of 8 can have
    assert "benched (idle)" not in page.locator("#ledger-counts th").all_inner_texts()  # no bench strategy
    page.fill("#prompt-q", pid)
    page.click("#prompt-search button")
    page.wait_for_selector("#prompt-attempts")
    assert page.locator("a.prompt-hit").count() == 1
    assert page.locator("#prompt-attempts").inner_text() == str(n)
    settle(page)
    page.screenshot(path=str(shots / "ledger-prompt.png"), full_page=True)


def test_a_rollout_filter_narrows_the_list(page, dash, runs):
    rows = lines(runs[0] / "rollouts.jsonl")
    load(page, f"{dash.url}/dash/rollouts")
    assert page.locator("#rollout-total").inner_text() == str(len(rows))
    assert page.locator("tr.rollout").count() == min(50, len(rows))
    page.select_option("#f-domain", "code")
    page.select_option("#f-kind", "train")
    page.click("#rollout-filter button")
    page.wait_for_selector("#main[data-state=ready]")
    settle(page)
    want = [r for r in rows if r["domain"] == "code" and r["kind"] == "train"]
    assert page.locator("#rollout-total").inner_text() == str(len(want))
    shown = page.locator("tr.rollout")
    assert shown.count() == min(50, len(want)) > 0
    assert set(shown.evaluate_all("rs => rs.map(r => r.dataset.domain)")) == {"code"}
    assert [int(s) for s in shown.evaluate_all("rs => rs.map(r => r.dataset.step)")] == [r["step"] for r in want][:50]
    sandbox = shown.evaluate_all("rs => rs.map(r => r.querySelector('.sandbox pre.stdout') !== null)")
    assert sandbox == ["stdout_head" in r["details"] for r in want][:50]  # the sandbox block where the line has one


def test_a_javascript_error_fails_the_page_load(page, dash):
    """The guard every test relies on: a failing route makes the page log a console error, and `load` fails."""
    page.route("**/api/dash/overview", lambda route: route.fulfill(status=500, body="broken"))
    with pytest.raises(AssertionError, match="console: Error: /api/dash/overview: HTTP 500"):
        load(page, f"{dash.url}/dash/overview")


def test_compare_puts_both_runs_on_one_chart(page, dash, runs):
    load(page, f"{dash.url}/dash/compare?key=val.math")
    chart = page.locator(".chart")
    n_vals = [len([r for r in lines(run / "metrics.jsonl") if r["kind"] == "validation"]) for run in runs]
    assert [len(drawn(chart, i + 1)) for i in range(len(runs))] == n_vals
    assert chart.evaluate("el => el.uplot.series.slice(1).map(s => s.label)") == [r.name for r in runs]
    assert max(ticks(chart, "y")) <= 1.0


def test_a_200k_attempt_ledger_renders_bounded(page, reward_server):
    t0 = time.monotonic()
    load(page, f"{reward_server.url}/dash/ledger")
    elapsed = time.monotonic() - t0
    assert page.locator("#ledger-attempts").inner_text() == str(BIG_ATTEMPTS)
    assert 0 < page.locator("tr").count() <= MAX_LEDGER_ROWS
    assert page.locator("tr.hist-row").count() <= 12
    page.fill("#prompt-q", "math")
    page.click("#prompt-search button")
    page.wait_for_selector("a.prompt-hit")
    assert page.locator("a.prompt-hit").count() == 20  # the route's default bound, of 2,000 matches
    settle(page)
    assert elapsed < 30, f"the Ledger page took {elapsed:.1f} s"
