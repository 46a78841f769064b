"""The reward server's FastAPI app, built by `create_app` (a factory: no app exists at import time).

Middleware order, outermost first: request timing (per route, fixed label set) → `BearerAuth` (401/403,
only when the config names a token file; see `auth`) → `BodyGuard` (413 for oversized bodies, 400 for
invalid UTF-8) → `_OneValueEach` (422 for a query parameter given twice) → `HotRoutes` (the scoring
routes' valid JSON bodies, answered without Starlette's routing) → FastAPI (422 with the field path for
schema errors, logged). The OpenAPI document states the rules between fields too (`openapi_rules`).
The app's lifespan creates the verifier pool and opens the ledger on start-up and, on shutdown (after
uvicorn has drained in-flight requests), closes the pool (killing sandboxes) and flushes the ledger.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from scalerl.env.dashboard.routes import DashSource, build_router
from scalerl.env.server.auth import BearerAuth, load_tokens, secure_openapi
from scalerl.env.server.curriculum_routes import router as curriculum_router
from scalerl.env.server.episode_routes import EpisodeStore
from scalerl.env.server.episode_routes import router as episode_router
from scalerl.env.server.ledger_routes import ingest_router
from scalerl.env.server.limits import BodyGuard
from scalerl.env.server.openapi_rules import state_rules
from scalerl.env.server.routes import ROUTE_PATHS, HotRoutes, router
from scalerl.env.server.server_config import ServerConfig
from scalerl.env.server.state import Pool, ServerState, build_version
from starlette.types import ASGIApp, Receive, Scope, Send

PROFILE_ENV = "SCALERL_SERVER_PROFILE"
logger = logging.getLogger(__name__)


def create_app(config: ServerConfig | None = None, *, pool: Pool | None = None, ledger: Any | None = None) -> FastAPI:
    """Build the app. A `pool` or `ledger` passed in is used as is and not closed by the app."""
    config = config or ServerConfig()
    state = ServerState(config, pool=pool, ledger=ledger)
    episodes = EpisodeStore(state)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await state.start()
        episodes.start()
        profiler = _event_loop_profiler()
        try:
            yield
        finally:
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(os.environ[PROFILE_ENV])
            await episodes.stop()  # before the ledger closes: closing frees sandboxes, records nothing
            await state.stop()

    app = FastAPI(
        title="scalerl reward server",
        version=build_version(),
        description="Verifiable rewards for RL on LLMs: math and code verdicts, OpenRLHF/veRL/TRL adapters; "
                    "a read-only dashboard of the ledger at / (its JSON routes under /api/dash/).",
        lifespan=lifespan,
    )
    app.state.scalerl = state
    app.state.episodes = episodes
    app.include_router(router)
    app.include_router(ingest_router)  # POST /v1/ledger/ingest: the owner's side of replica mode
    app.include_router(curriculum_router)  # /v1/curriculum/*: 409 until the server has a ledger
    app.include_router(episode_router)  # /v1/episodes: multi-turn environments (episode_routes)
    dash = DashSource(ledger=lambda: state.ledger, ledger_label=str(config.ledger or "") or None)
    app.include_router(build_router(dash))  # the read-only dashboard at /, its JSON routes under /api/dash/
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_middleware(HotRoutes, routes=[*router.routes, *ingest_router.routes])
    app.add_middleware(_OneValueEach)
    reject = lambda reason: state.metrics.rejected.labels(reason=reason).inc()
    app.add_middleware(BodyGuard, max_body_bytes=config.limits.max_body_bytes, on_reject=reject)
    if config.security.token_file:
        app.add_middleware(BearerAuth, tokens=load_tokens(config.security.token_file), on_reject=reject)
    openapi = app.openapi
    max_items = config.limits.max_batch_items
    # FastAPI caches openapi_schema (the dict both functions change in place)
    app.openapi = lambda: app.openapi_schema or secure_openapi(state_rules(openapi(), max_items))
    app.add_middleware(_Timing, state=state)
    return app


def _event_loop_profiler() -> Any:
    """With SCALERL_SERVER_PROFILE=FILE, cProfile the event-loop thread from readiness to shutdown and
    write the stats to FILE (a measuring aid for benchmarks/bench_server.py; scoring threads are not
    profiled, so it shows what HTTP adds: parsing, validation, encoding, hand-offs)."""
    if not os.environ.get(PROFILE_ENV):
        return None
    import cProfile

    profiler = cProfile.Profile(time.thread_time)  # CPU time: waiting for the GIL or a core is not charged
    profiler.enable()
    return profiler


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 naming each offending field by its dotted path; the input is not echoed back (it may be huge),
    and the refusal is logged (method, path, fields)."""
    request.app.state.scalerl.metrics.rejected.labels(reason="invalid").inc()
    detail = []
    for err in exc.errors():
        loc = [p if isinstance(p, int) else str(p) for p in err.get("loc", ())]
        path = loc[1:] if loc[:1] == ["body"] else loc
        msg, kind = str(err.get("msg", "")), str(err.get("type", ""))
        if kind == "json_invalid":  # FastAPI puts the character offset where a field path would be
            reason = (err.get("ctx") or {}).get("error", "")
            msg, path = f"invalid JSON at character {path[0] if path else '?'}: {reason}".rstrip(": "), []
        elif kind == "string_type" and path[-1:] == ["answer"] and isinstance(err.get("input"), (dict, list)):
            msg += "; a structured reference (an if item's constraints) goes as its JSON text: json.dumps(...)"
        detail.append({"field": ".".join(str(p) for p in path) or "body", "loc": loc, "msg": msg, "type": kind})
    logger.info("422 %s %s: %s", request.method, request.url.path,
                "; ".join(f"{d['field']}: {d['msg']}" for d in detail[:5]) + (" ..." if len(detail) > 5 else ""))
    return JSONResponse({"detail": detail}, status_code=422)


class _OneValueEach:
    """422 for a query parameter given more than once: each of this API's query parameters takes one value,
    and FastAPI would silently keep the last."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        query = scope.get("query_string", b"") if scope["type"] == "http" else b""
        names = [name for name, _ in parse_qsl(query.decode("latin-1"), keep_blank_values=True)] if query else []
        repeated = sorted({name for name in names if names.count(name) > 1})
        if not repeated:
            await self.app(scope, receive, send)
            return
        exc = RequestValidationError([{"loc": ("query", name), "type": "multiple_values",
                                       "msg": f"given {names.count(name)} times; it takes one value"}
                                      for name in repeated])
        response = await _validation_error(Request(scope, receive), exc)
        await response(scope, receive, send)


class _Timing:
    """Request latency by route template; unknown paths share one label so cardinality stays fixed."""

    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            path = scope.get("path", "")
            route = path if path in ROUTE_PATHS else "other"
            self.state.metrics.request_seconds.labels(route=route).observe(time.perf_counter() - start)
