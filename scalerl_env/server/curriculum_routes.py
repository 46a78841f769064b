"""The curriculum routes of the reward server (`/v1/curriculum/*`): `scalerl.curriculum.service` over HTTP.

The routes are always in the OpenAPI document; on a server without `--ledger` each answers 409 (the
curriculum's state lives in the ledger). The service is built on the first curriculum request from
the server's ledger (its registered sets and sampler states), so a restarted server resumes. Work
runs off the event loop (DuckDB, the sampler). Errors: unknown set 404, a conflict with what was
registered or drawn before 409, input the service refuses 422 naming the field (as schema errors do).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from scalerl.curriculum.ledger.models import LedgerError
from scalerl.curriculum.service import CurriculumService, Member, MissingInputError, ServiceError, SetInputError
from scalerl.curriculum.service_models import (
    DrawRequest,
    DrawResponse,
    RegisterSetRequest,
    ReportRequest,
    ReportResponse,
    SetList,
    SetState,
    SetSummary,
)
from scalerl.env.contracts.records import ProblemRecord
from scalerl.env.server.models import error_responses

router = APIRouter(prefix="/v1/curriculum", tags=["curriculum"])
_BUILD_LOCK = threading.Lock()
NO_LEDGER = "no ledger is attached to this server: the curriculum lives in the ledger; start it with --ledger FILE"


DESCRIBED = {400: "malformed body (invalid UTF-8, bad Content-Length)",
             404: "no set of that name is registered; or (`detail` starting with the field) a prompt the set "
                  "does not hold, a Parquet file the server does not have",
             409: "no ledger attached, or a conflict with what was registered or drawn before",
             413: "body larger than limits.max_body_bytes"}


def _responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    return error_responses(DESCRIBED, *codes)


def _build(app: Any, ledger: Any) -> CurriculumService:
    with _BUILD_LOCK:
        service = getattr(app.state, "curriculum", None)
        if service is None or service.ledger is not ledger:
            service = app.state.curriculum = CurriculumService(ledger)
        return service


async def _call(request: Request, work: Any) -> Any:
    """`work(service)` on a thread; the service's errors as HTTP answers."""
    ledger = request.app.state.scalerl.ledger
    if ledger is None:
        raise HTTPException(409, NO_LEDGER)

    def run() -> Any:
        return work(_build(request.app, ledger))

    try:
        return await asyncio.to_thread(run)
    except MissingInputError as exc:  # well formed, naming what is not there: 404, the detail naming the field
        raise HTTPException(404, str(exc)) from None
    except SetInputError as exc:
        raise _field_error(exc.field, exc.msg) from None
    except ServiceError as exc:
        raise HTTPException(exc.status, str(exc)) from None
    except LedgerError as exc:  # e.g. a read-only ledger (the dashboard's): nothing can be registered or drawn
        raise HTTPException(409, f"the server's ledger refused the write: {exc}") from None


def _field_error(field: str, msg: str) -> RequestValidationError:
    loc = [int(p) if p.isdigit() else p for p in field.split(".")]
    return RequestValidationError([{"loc": ("body", *loc), "msg": msg, "type": "value_error"}])


def _parquet_members(path: str, split: str, field: str) -> list[Member]:
    from scalerl.env.sources.verl import read_records

    if not Path(path).is_file():
        raise MissingInputError(field, f"no such file on the server: {path}")
    try:
        records, errors = read_records(path)
    except Exception as exc:  # not a parquet file: the caller's input, named
        raise SetInputError(field, f"cannot read {path} as Parquet: {type(exc).__name__}: {exc}") from None
    if errors:
        shown = "; ".join(str(e) for e in errors[:3])
        raise SetInputError(field, f"{len(errors)} row(s) of {path} are not problems: {shown}")
    first: dict[str, ProblemRecord] = {}
    for r in records:  # the id hashes source and prompt: a repeated id is the same problem; the first row
        first.setdefault(r.prompt_id, r)  # is kept, as `scalerl train` keeps it
    return [Member(r.prompt_id, r.domain, r.source, split, r) for r in first.values()]


def _members(body: RegisterSetRequest) -> tuple[list[Member], str]:
    """The set's members from the Parquet files or the inline records, and the field they came from."""
    if (body.parquet is None) == (body.records is None):
        raise SetInputError("records", "give exactly one of parquet (a file on the server) or records (inline)")
    if body.parquet is not None:
        heldout = [] if body.heldout_parquet is None else _parquet_members(body.heldout_parquet, "heldout",
                                                                            "heldout_parquet")
        held = {m.prompt_id for m in heldout}  # a prompt in both files is held out (left out of training)
        train = [m for m in _parquet_members(body.parquet, "train", "parquet") if m.prompt_id not in held]
        return train + heldout, "parquet"
    if body.heldout_parquet is not None:
        raise SetInputError("heldout_parquet", "heldout_parquet goes with parquet; inline records say split")
    out = []
    for i, r in enumerate(body.records or []):
        record = None
        if r.prompt is not None:
            try:
                record = ProblemRecord(prompt_id=r.prompt_id, domain=r.domain, source=r.source, prompt=r.prompt,
                                       answer=r.answer, tests=r.tests, limits=r.limits)
            except ValidationError as exc:
                err = exc.errors()[0]
                raise SetInputError(".".join(str(p) for p in ("records", i, *err["loc"])), err["msg"]) from None
        elif r.answer is not None or r.tests is not None or r.limits is not None:
            raise SetInputError(f"records.{i}.prompt", "answer/tests/limits need the prompt (or give ids only)")
        out.append(Member(r.prompt_id, r.domain, r.source, r.split, record))
    return out, "records"


@router.post("/sets", response_model=SetSummary, responses=_responses(400, 404, 409, 413))
async def register_set(body: RegisterSetRequest, request: Request) -> SetSummary:
    """Register a problem set (or get it back unchanged: registering the same spec again is a no-op)."""

    def work(service: CurriculumService) -> SetSummary:
        members, field = _members(body)
        return service.register(body.name, members, seed=body.seed, domain_weights=body.domain_weights,
                                curriculum=body.curriculum, field=field)

    return await _call(request, work)


@router.get("/sets", response_model=SetList, responses=_responses(409))
async def list_sets(request: Request) -> SetList:
    """Every registered set."""
    return await _call(request, lambda service: SetList(sets=service.summaries()))


@router.get("/sets/{name}", response_model=SetState, responses=_responses(404, 409))
async def set_state(name: str, request: Request) -> SetState:
    """A set's state: counts per domain, retired prompts, weights, the strategies' gauges and events."""
    return await _call(request, lambda service: service.get(name).state())


@router.post("/sets/{name}/draw", response_model=DrawResponse, responses=_responses(400, 404, 409, 413))
async def draw(name: str, body: DrawRequest, request: Request) -> DrawResponse:
    """This rank's prompts of draw `draw_id` (made on the first request of any rank; repeated requests
    get the same prompts)."""
    return await _call(request, lambda service: service.get(name).draw(body))


@router.post("/sets/{name}/report", response_model=ReportResponse, responses=_responses(400, 404, 409, 413))
async def report(name: str, body: ReportRequest, request: Request) -> ReportResponse:
    """Group outcomes (rewards per sample) into the ledger; the ledger's rule retires prompts."""
    return await _call(request, lambda service: service.get(name).report(body))
