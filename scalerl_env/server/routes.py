"""Routes of the reward server. Each takes and returns a pydantic model; errors are 4xx naming the field.

The scoring routes are answered by `HotRoutes` (below) when their body is valid JSON of their model."""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import math
import typing
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from scalerl.curriculum.ledger.models import MAX_KEY_CHARS
from scalerl.env.adapters import AdapterInputError, openrlhf
from scalerl.env.contracts.records import VerifyItem
from scalerl.env.server.limits import read_body, replay
from scalerl.env.server.models import (
    IDEMPOTENCY_HEADER,
    Health,
    LedgerQueryRequest,
    LedgerQueryResponse,
    Readiness,
    RewardRequest,
    RewardResponse,
    VerifyRequest,
    VerifyResponse,
    error_responses,
)
from scalerl.env.server.owner_link import OwnerUnavailable
from scalerl.env.server.state import ServerState
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send


class HotRoutes:
    """ASGI middleware that answers the scoring routes (`POST /v1/verify`, `/get_reward`) itself: it validates
    the raw body in one pydantic pass (`model_validate_json`), calls the route's endpoint and sends the
    `Response` it builds, without Starlette's routing, exception middleware and request-response wrapper
    or FastAPI's handler (which decodes the JSON into Python objects, validates those and solves the
    endpoint's dependencies): about a quarter of the event loop's CPU per request (sequential 16-item
    math requests, docs/server.md: 476–512 µs → 350–373 µs). Exceptions raised by the endpoint
    (`HTTPException`, `RequestValidationError`) go to the app's (async) exception handlers, as
    `ExceptionMiddleware` would send them.

    Any request this pass does not accept (another content type, no body, malformed JSON, schema errors)
    goes on to the app with its body replayed, so every error answer is FastAPI's own, unchanged; so is
    the OpenAPI document (the routes stay registered). Hot routes are the POST endpoints that take one
    body model and the `Request` and build their own `Response` (no output model for FastAPI to apply).
    Sits inside `BodyGuard` (size and UTF-8 checks) and the request timing, which apply to both paths."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.hot = {route.path: spec for route in routes if (spec := _hot_spec(route)) is not None}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        spec = self.hot.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if spec is None or not _declares_json(scope):
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)
        if body is None:  # the client went away mid-body: nobody to answer
            return
        model, body_name, request_name, endpoint = spec
        try:
            parsed = model.model_validate_json(body)
        except ValidationError:  # the app answers it (FastAPI's 422 naming the field)
            await self.app(scope, replay(body, receive), send)
            return
        request = Request(scope, receive)
        try:
            response = await endpoint(**{body_name: parsed, request_name: request})
        except Exception as exc:
            handler = _exception_handler(scope["app"].exception_handlers, exc)
            if handler is None:
                raise
            response = await handler(request, exc)
        await response(scope, receive, send)


def _hot_spec(route: BaseRoute) -> tuple[type[BaseModel], str, str, Callable[..., Any]] | None:
    """(body model, its parameter name, the request's parameter name, endpoint) of a hot route, else None."""
    if not isinstance(route, APIRoute) or route.methods != {"POST"}:
        return None
    d = route.dependant
    returns = typing.get_type_hints(d.call).get("return") if d.call else None
    if (len(d.body_params) != 1 or d.request_param_name is None or d.dependencies or d.query_params
            or d.path_params or d.header_params or d.cookie_params or d.response_param_name
            or not (isinstance(returns, type) and issubclass(returns, Response))):
        return None
    return d.body_params[0].field_info.annotation, d.body_params[0].name, d.request_param_name, d.call


def _exception_handler(handlers: dict[Any, Callable[..., Any]], exc: Exception) -> Callable[..., Any] | None:
    """The handler Starlette's `ExceptionMiddleware` would pick: by status code, then by exception class.
    500 and `Exception` handlers belong to its `ServerErrorMiddleware`, further out: left to it."""
    if isinstance(exc, StarletteHTTPException) and exc.status_code in handlers and exc.status_code != 500:
        return handlers[exc.status_code]
    return next((handlers[cls] for cls in type(exc).__mro__ if cls in handlers and cls is not Exception), None)


def _declares_json(scope: Scope) -> bool:
    for key, value in scope["headers"]:
        if key == b"content-type":
            return value.partition(b";")[0].strip().lower() == b"application/json"
    return False


router = APIRouter()
ROUTE_PATHS = frozenset({"/v1/verify", "/healthz", "/readyz", "/metrics", "/v1/ledger/query", "/get_reward",
                         "/v1/ledger/ingest"})
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


ERRORS_DESCRIBED = {
    400: "malformed body (invalid UTF-8, bad Content-Length) or rejected SQL",
    409: "no ledger is attached (start the server with --ledger FILE), or an Idempotency-Key reused for "
         "another prompt",
    413: "body larger than limits.max_body_bytes or more items than limits.max_batch_items",
    503: "overloaded (too many items in flight), shutting down, or (replica) the ledger owner has not "
         "committed; retry after Retry-After seconds, with the same Idempotency-Key",
    504: "not finished within the deadline",
    500: "a verifier or ledger fault (logged); the verdicts were not acknowledged",
}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return error_responses(ERRORS_DESCRIBED, *codes)


def _json(model: BaseModel) -> Response:
    """Serialized by pydantic in one pass: the hot routes skip FastAPI's re-validation of their output
    (the model was just built, so it is valid); NaN and infinities become null."""
    return Response(content=model.model_dump_json(), media_type="application/json")


def _state(request: Request) -> ServerState:
    return request.app.state.scalerl


# The header is read from the request, not declared as a parameter (that would take the route off
# HotRoutes' path); it is documented in the OpenAPI document here.
_KEYED = {"parameters": [{"name": IDEMPOTENCY_HEADER, "in": "header", "required": False, "schema": {
    "type": "string", "minLength": 1, "maxLength": MAX_KEY_CHARS}, "description":
    "names this request: each (key, item index) is recorded once, and a replay gets the verdicts recorded first"}]}


def _idempotency_key(request: Request) -> str | None:
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is not None and not 1 <= len(key) <= MAX_KEY_CHARS:
        raise RequestValidationError([{"loc": ("header", IDEMPOTENCY_HEADER), "type": "string_too_long",
                                       "msg": f"must be 1 to {MAX_KEY_CHARS} characters, got {len(key)}"}])
    return key


@router.post("/v1/verify", response_model=VerifyResponse, responses=_errors(400, 409, 413, 500, 503, 504),
             openapi_extra=_KEYED)
async def verify(body: VerifyRequest, request: Request) -> Response:
    """Score math and code items (mixed freely); verdicts come back in request order."""
    _reject_surrogates(body.items, lambda i, name: ("items", i, name))
    return _json(VerifyResponse(results=await _state(request).score(body.items, _idempotency_key(request))))


@router.post("/get_reward", response_model=RewardResponse, responses=_errors(400, 409, 413, 500, 503, 504),
             openapi_extra=_KEYED)
async def get_reward(body: RewardRequest, request: Request) -> Response:
    """OpenRLHF remote reward model: `--remote_rm_url http://HOST:PORT/get_reward`."""
    try:
        items = openrlhf.request_items(body)
    except AdapterInputError as exc:
        raise RequestValidationError([{"loc": ("body", *exc.loc), "msg": exc.msg, "type": "value_error"}]) from None
    _reject_surrogates(items, lambda i, name: ("query", i) if name == "completion" else ("labels", i))
    verdicts = await _state(request).score(items, _idempotency_key(request))
    return _json(openrlhf.reward_response(verdicts, prompts_stripped=openrlhf.stripped_flags(body)))


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Alive: the process answers. Says nothing about the verifier pool (see /readyz)."""
    return Health()


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(request: Request, response: Response) -> Readiness:
    """Ready: math workers warm, the sandbox meets `verifier.code.sandbox` (else code items would all be
    `error`; lower that level explicitly to serve anyway), and the server is not draining."""
    state = _state(request)
    pool_ready = state.pool is not None and await asyncio.to_thread(state.pool.ready)
    ready = bool(pool_ready) and not state.draining and bool(state.sandbox_layers.get("meets_minimum"))
    if not ready:
        response.status_code = 503
    return Readiness(ready=ready, draining=state.draining, verifier=_plain(state.pool_info()),
                     sandbox=state.sandbox_layers, ledger=state.config.ledger)


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}})
async def metrics(request: Request) -> Response:
    """Prometheus exposition (text format 0.0.4); an explicit route, not a mounted sub-app."""
    body = await asyncio.to_thread(_state(request).metrics.render)
    return Response(content=body, media_type=METRICS_CONTENT_TYPE)


@router.post("/v1/ledger/query", response_model=LedgerQueryResponse, responses=_errors(400, 409, 413, 503, 504))
async def ledger_query(body: LedgerQueryRequest, request: Request) -> LedgerQueryResponse:
    """Read-only SQL against the attached ledger, or through a replica to its owner (what
    `scalerl-env ledger query --url` calls)."""
    state = _state(request)
    if state.owner is not None:  # a replica: the owner answers, status and body passed through
        try:
            answer = await asyncio.to_thread(state.owner.query, body.model_dump_json().encode())
        except OwnerUnavailable as exc:
            raise HTTPException(503, str(exc), headers={"Retry-After": "1"}) from None
        return Response(content=answer.content, status_code=answer.status_code, media_type="application/json")
    if state.ledger is None:
        raise HTTPException(409, "no ledger is attached to this server; start it with --ledger FILE")
    timeout_s = min(body.timeout_s or state.config.ledger_query_timeout_s, state.config.max_ledger_query_timeout_s)
    try:
        result = await asyncio.to_thread(
            state.ledger.query, body.sql, timeout_s=timeout_s, max_rows=state.config.max_ledger_rows
        )
    except Exception as exc:  # read-only guard, SQL errors: the caller's mistake, not ours
        from scalerl.curriculum.ledger.models import QueryTimeoutError  # importable whenever a ledger is attached

        status = 504 if isinstance(exc, QueryTimeoutError) else 400
        raise HTTPException(status, f"{type(exc).__name__}: {exc}") from None
    rows = [[_plain(v) for v in row] for row in result.rows]
    return LedgerQueryResponse(columns=[str(c) for c in result.columns], rows=rows,
                               truncated=bool(getattr(result, "truncated", False)))


def _reject_surrogates(items: Sequence[VerifyItem], loc: Callable[[int, str], tuple]) -> None:
    """JSON escapes can smuggle lone surrogates (not Unicode) past the UTF-8 check: 422 naming the field."""
    for i, item in enumerate(items):
        for name in ("completion", "answer"):
            text = getattr(item, name)
            if text is not None and not text.isascii():
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise RequestValidationError([{"loc": ("body", *loc(i, name)), "type": "unicode_error",
                                                   "msg": f"lone surrogate at character {exc.start}"}]) from None


def _plain(value: Any) -> Any:
    """A JSON-safe copy: NaN/inf → null, timestamps → ISO text, decimals → float, bytes → hex."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return _plain(float(value))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, (uuid.UUID, dt.timedelta)):
        return str(value)
    return str(value)
