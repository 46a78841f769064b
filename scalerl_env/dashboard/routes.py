"""The dashboard's routes: `build_router(source)` gives the pages at `/` and `/dash/<page>`, typed JSON
under `/api/dash/`, and the static files (`ASSETS`) under `/dash-static/`.

A `DashSource` says where the data is: a run folder (metrics, curves, rollouts, and its ledger), or only
a ledger (the reward server's own, whose `query` is read-only). A run folder's ledger is opened
read-only; while the trainer holds it for writing (DuckDB's file lock), the ledger copy of the latest
checkpoint is read instead (reopened when a newer checkpoint appears), and the page says which.
Guaranteed: no route writes; every list is bounded (`limit` <= 200 rollouts, 50 search hits, the bounds
of `readers` and `ledger_view`); a failing ledger query answers 503 with the reason, not 500.
Not guaranteed: a finished run's ledger held open by the dashboard can be resumed into (DuckDB refuses
the trainer's write lock while a reader has the file open: stop the dashboard first).
"""

from __future__ import annotations

import threading
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import HTMLResponse, Response
from scalerl.curriculum.ledger.models import LedgerError
from scalerl.env.dashboard import ledger_view, readers
from scalerl.env.dashboard import models as m
from scalerl.env.dashboard.rollouts import MAX_LIMIT, Filter, RolloutIndex, rollout

PAGES = ("overview", "ledger", "rollouts", "curriculum", "compare")
NO_RUN = {404: {"model": m.ErrorDetail, "description": "no run folder behind this dashboard (a reward server's)"}}
NO_PROMPT = {404: {"model": m.ErrorDetail, "description": "no such prompt, or no ledger"}}
LEDGER_FAILED = {503: {"model": m.ErrorDetail, "description": "the ledger query failed (the reason is given)"}}
JS, CSS = "text/javascript; charset=utf-8", "text/css; charset=utf-8"
ASSETS = {"app.js": JS, "style.css": CSS, "vendor/uPlot.iife.min.js": JS, "vendor/uPlot.min.css": CSS}
"""Every static file a page loads (the vendored charting library, uPlot, is under vendor/ with its licence)."""


class DashSource:
    """A run folder and/or a ledger. `ledger` may be a callable returning the ledger (or None)."""

    def __init__(self, run: Path | None = None, ledger: Any = None, compare: list[Path] | None = None,
                 ledger_label: str | None = None) -> None:
        self.run, self._ledger, self.compare = run, ledger, list(compare or [])
        self.ledger_label = ledger_label
        self.cache = readers.JsonlCache()
        self._indexes: dict[Path, RolloutIndex] = {}
        self._opened: Any = None
        self._opened_path: Path | None = None
        self._lock = threading.Lock()

    def ledger(self) -> tuple[Any, str | None]:
        """(the ledger or None, where it is or why there is none)."""
        if self._ledger is not None:
            led = self._ledger() if callable(self._ledger) else self._ledger
            return led, (self.ledger_label or "server") if led is not None else "the server has no ledger (--ledger)"
        if self.run is None:
            return None, "no run folder and no ledger"
        with self._lock:
            return self._open_run_ledger(self.run)

    def _open_run_ledger(self, run: Path) -> tuple[Any, str | None]:
        main = run / "ledger.duckdb"
        if self._opened is not None and self._opened_path == main:
            return self._opened, str(main)
        if not main.exists():
            return None, f"{main} does not exist"
        reason = self._try_open(main)
        if reason is None:
            return self._opened, str(main)
        copy = _latest_checkpoint_ledger(run)
        if copy is None:
            return None, reason
        if self._opened_path != copy and self._try_open(copy) is not None:
            return None, reason
        return self._opened, f"{copy} (the latest checkpoint's copy: the run holds {main.name})"

    def _try_open(self, path: Path) -> str | None:
        from scalerl.curriculum.ledger.store import Ledger

        try:
            led = Ledger(path, read_only=True)
        except LedgerError as exc:
            return str(exc)
        self.close()
        self._opened, self._opened_path = led, path
        return None

    def close(self) -> None:
        if self._opened is not None:
            self._opened.close()
            self._opened, self._opened_path = None, None

    def need_run(self) -> Path:
        if self.run is None:
            raise HTTPException(404, "no run folder: start the dashboard with `scalerl dash RUN_DIR`")
        return self.run

    def index(self, run: Path) -> RolloutIndex:
        with self._lock:
            return self._indexes.setdefault(run, RolloutIndex(run / "rollouts.jsonl"))


def _latest_checkpoint_ledger(run: Path) -> Path | None:
    try:
        name = (run / "checkpoints" / "latest").read_text().strip()
    except OSError:
        return None
    path = run / "checkpoints" / name / "ledger.duckdb"
    return path if name and "/" not in name and path.is_file() else None


def _asset(name: str) -> str:
    return resources.files("scalerl.env.dashboard").joinpath("static", name).read_text(encoding="utf-8")


def build_router(source: DashSource) -> APIRouter:
    """The pages and the JSON routes over `source`: the JSON routes are in the app's OpenAPI document (with
    their response models and error answers), the pages and static files are not."""
    router = APIRouter(tags=["dashboard"])
    _pages(router)
    _run_routes(router, source)
    _ledger_routes(router, source)
    return router


def _pages(router: APIRouter) -> None:
    @router.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> HTMLResponse:
        return HTMLResponse(_asset("index.html"))

    @router.get("/dash/{page}", response_class=HTMLResponse, include_in_schema=False)
    def page(page: str) -> HTMLResponse:
        if page not in PAGES:
            raise HTTPException(404, f"no page {page!r}")
        return HTMLResponse(_asset("index.html"))

    @router.get("/dash-static/{name:path}", include_in_schema=False)
    def asset(name: str) -> Response:
        if name not in ASSETS:
            raise HTTPException(404, f"no asset {name!r}")
        return Response(_asset(name), media_type=ASSETS[name])


def _run_routes(router: APIRouter, source: DashSource) -> None:
    @router.get("/api/dash/info", response_model=m.Info)
    def info() -> m.Info:
        _, where = source.ledger()
        return m.Info(run=source.run.name if source.run else None, ledger=where,
                      compare=[p.name for p in source.compare])

    @router.get("/api/dash/overview", response_model=m.Overview, responses=NO_RUN)
    def overview() -> m.Overview:
        return readers.overview(source.cache, source.need_run())

    @router.get("/api/dash/curriculum", response_model=list[m.Series], responses=NO_RUN)
    def curriculum() -> list[m.Series]:
        return readers.curriculum_series(readers.metric_rows(source.cache, source.need_run(), "step"))

    @router.get("/api/dash/rollouts", response_model=m.RolloutPage, responses=NO_RUN)
    def rollouts(domain: str | None = None, status: str | None = None, step: int | None = None,
                 prompt: str | None = None, kind: str | None = None, offset: int = Query(0, ge=0),
                 limit: int = Query(50, ge=1, le=MAX_LIMIT)) -> m.RolloutPage:
        run = source.need_run()
        flt = Filter(domain or None, status or None, step, prompt or None, kind or None)
        total, rows, domains, statuses = source.index(run).page(flt, offset, limit)
        led, _ = source.ledger()
        texts = _safe(lambda: ledger_view.texts(led, [r.get("prompt_id") for r in rows]), {}) if led else {}
        return m.RolloutPage(total=total, offset=offset, limit=limit, domains=domains, statuses=statuses,
                             rows=[rollout(r, texts.get(r.get("prompt_id"))) for r in rows])

    @router.get("/api/dash/compare", response_model=m.CompareView, responses=NO_RUN)
    def compare(key: str = "reward/mean") -> m.CompareView:
        runs = ([source.run] if source.run else []) + source.compare
        if not runs:
            raise HTTPException(404, "no run folders to compare: `scalerl dash RUN_DIR --compare OTHER`")
        return readers.compare(source.cache, runs, key)


def _safe(fn: Any, default: Any) -> Any:
    try:
        return fn()
    except LedgerError:
        return default


def _ledger_call(source: DashSource, fn: Any) -> Any:
    led, where = source.ledger()
    if led is None:
        return None, where
    try:
        return fn(led), where
    except LedgerError as exc:
        raise HTTPException(503, f"ledger query failed: {exc}") from exc


def _ledger_routes(router: APIRouter, source: DashSource) -> None:
    @router.get("/api/dash/ledger", response_model=m.LedgerView, responses=LEDGER_FAILED)
    def ledger() -> m.LedgerView:
        settings = readers.run_settings(source.run)
        view, where = _ledger_call(source, lambda led: ledger_view.view(led, settings=settings))
        return view if view is not None else ledger_view.view(None, where)

    @router.get("/api/dash/prompts", response_model=list[m.PromptHit], responses=LEDGER_FAILED)
    def prompts(q: str = Query(..., min_length=1, max_length=200),
                limit: int = Query(20, ge=1, le=50)) -> list[m.PromptHit]:
        hits, _ = _ledger_call(source, lambda led: ledger_view.search(led, q, limit))
        return hits or []

    @router.get("/api/dash/prompts/{prompt_id}", response_model=m.PromptHistory,
                responses={**LEDGER_FAILED, **NO_PROMPT})
    def prompt(prompt_id: str) -> m.PromptHistory:
        hist, where = _ledger_call(source, lambda led: ledger_view.history(led, prompt_id))
        if hist is None:
            raise HTTPException(404, f"no prompt {prompt_id!r} in the ledger ({where})")
        return hist
