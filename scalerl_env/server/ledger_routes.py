"""The ledger owner's ingest route: replicas commit the verdict rows they scored here.

`POST /v1/ledger/ingest` records each row once per (idempotency key, item index) in one transaction
(`scalerl.curriculum.ledger.store.Ledger.record_once`) and answers after the commit; rows whose pair was recorded
before are not appended again and come back with the verdict recorded then. Answered by `HotRoutes`
(one-pass validation of the raw body), like the scoring routes. It needs the `score` scope when tokens
are configured (it writes).
"""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter, HTTPException, Request, Response
from scalerl.env.server.models import ErrorResponse, LedgerIngestRequest, LedgerIngestResponse, ReplayedRow
from scalerl.env.server.owner_link import INGEST_PATH, commit_rows

logger = logging.getLogger(__name__)
ingest_router = APIRouter()


@ingest_router.post(INGEST_PATH, response_model=LedgerIngestResponse, responses={
    400: {"model": ErrorResponse, "description": "malformed body (invalid UTF-8, bad Content-Length)"},
    409: {"model": ErrorResponse, "description": "no ledger attached, or a key reused for another prompt"},
    413: {"model": ErrorResponse, "description": "body larger than limits.max_body_bytes"},
    500: {"model": ErrorResponse, "description": "the ledger write failed and was rolled back; re-send"},
    503: {"model": ErrorResponse, "description": "shutting down; re-send (same rows, same keys)"}})
async def ledger_ingest(body: LedgerIngestRequest, request: Request) -> Response:
    """Commit verdict rows forwarded by a replica (`scalerl-env serve --ledger-owner URL`)."""
    from scalerl.curriculum.ledger.idempotency import IdempotencyConflict

    state = request.app.state.scalerl
    if state.ledger is None:
        raise HTTPException(409, "this server owns no ledger; start the owner with --ledger FILE")
    if state.draining:  # the replica re-sends, to this owner's successor
        raise HTTPException(503, "the ledger owner is shutting down", headers={"Retry-After": "1"})
    try:
        replayed = await asyncio.to_thread(commit_rows, state.ledger, body.rows)
    except IdempotencyConflict as exc:
        raise HTTPException(409, str(exc)) from None
    except Exception as exc:
        logger.exception("ingest of %d rows failed", len(body.rows))
        raise HTTPException(500, f"ledger write failed: {type(exc).__name__}: {exc}") from None
    state.metrics.ledger_records.inc(len(body.rows) - len(replayed))
    response = LedgerIngestResponse(recorded=len(body.rows) - len(replayed),
                                    replayed=[ReplayedRow(row=pos, verdict=v) for pos, v in sorted(replayed.items())])
    return Response(content=response.model_dump_json(), media_type="application/json")
