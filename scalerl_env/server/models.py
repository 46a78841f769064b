"""HTTP request and response models of the reward server (all `extra="forbid"`).

The verify route takes and returns the project's own contracts (`VerifyItem`, `Verdict`); the
OpenRLHF route takes the shape OpenRLHF's remote reward model sends (`query`, `prompts`, `labels`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator
from scalerl.curriculum.ledger.models import MAX_KEY_CHARS
from scalerl.env.contracts.records import (
    JSON_NUMBER,
    Domain,
    LedgerBigint,
    LedgerInteger,
    Strict,
    Verdict,
    VerifyItem,
    WireBool,
    WireInt,
)

# Request header naming one scoring request; its items are identified by their index in the request, so a
# server records each (key, index) once however often the request is re-sent (the client sets one always).
IDEMPOTENCY_HEADER = "Idempotency-Key"


class VerifyRequest(Strict):
    items: list[VerifyItem] = Field(description=(
        "items of any installed domain (math, code, if, a plug-in's), mixed freely; answered in order; a "
        "reference its domain cannot read (e.g. an `if` answer that is not JSON text naming constraints) is "
        "refused, naming the field"))

    @model_validator(mode="before")
    @classmethod
    def _bare_item(cls, data: Any) -> Any:
        """One clear error for an item posted without the wrapper, instead of one per field it holds."""
        if isinstance(data, dict) and "items" not in data and {"domain", "completion"} & data.keys():
            raise ValueError('this is one item, not a request: send {"items": [ITEM, ...]}')
        return data


class VerifyResponse(Strict):
    results: list[Verdict] = Field(description="one verdict per item, in the order of the request")


class Health(Strict):
    status: str = "ok"


class Readiness(Strict):
    ready: bool
    draining: bool
    verifier: dict[str, Any] = Field(default_factory=dict, description="the verifier pool's info()")
    sandbox: dict[str, Any] = Field(default_factory=dict, description="sandbox isolation layers detected")
    ledger: str | None = None


class LedgerQueryRequest(Strict):
    sql: str = Field(min_length=1, max_length=100_000, description="one read-only SQL statement")
    timeout_s: Annotated[float, Field(gt=0), JSON_NUMBER] | None = Field(
        default=None, description="defaults to the server's setting")


class LedgerQueryResponse(Strict):
    """Same shape as `scalerl.curriculum.ledger.models.QueryResult`."""

    columns: list[str]
    rows: list[list[Any]]
    truncated: bool = Field(default=False, description="more rows existed than max_ledger_rows")


class RewardRequest(Strict):
    """OpenRLHF remote reward model request: `query` is prompt + response, `labels` the references."""

    query: list[str]
    prompts: list[str] | None = Field(default=None, description=(
        "as many as query; each is stripped from the front of its query"))
    labels: list[str | dict[str, Any]] = Field(description=(
        "as many as query; math: the answer text; code: a test spec, as an object or its JSON text; if: the "
        "constraints, as an object or its JSON text (docs/server.md, 'References, as datasets hand them over')"))

    @model_validator(mode="after")
    def _same_lengths(self) -> RewardRequest:
        if len(self.labels) != len(self.query):
            raise ValueError(f"labels has {len(self.labels)} entries, query has {len(self.query)}")
        if self.prompts is not None and len(self.prompts) != len(self.query):
            raise ValueError(f"prompts has {len(self.prompts)} entries, query has {len(self.query)}")
        return self


class RewardResponse(Strict):
    rewards: list[float] = Field(description="the reward table's value for each verdict")
    scores: list[float] = Field(description="1.0 when the verdict is correct, else 0.0 (for dynamic filtering)")
    extra_logs: dict[str, list[float]] = Field(description="per-sample diagnostics OpenRLHF logs")


class ErrorResponse(Strict):
    detail: str


class FieldError(Strict):
    field: str = Field(description="dotted path of the offending field, e.g. items.3.answer")
    loc: list[str | int]
    msg: str
    type: str


class ValidationErrorResponse(Strict):
    detail: list[FieldError]


def error_responses(described: dict[int, str], *codes: int) -> dict[int | str, dict[str, Any]]:
    """A route's documented error answers: `codes` with their `described` text, plus the 422 every typed
    body has."""
    out: dict[int | str, dict[str, Any]] = {c: {"model": ErrorResponse, "description": described[c]} for c in codes}
    out[422] = {"model": ValidationErrorResponse, "description": "schema error; `field` names the path"}
    return out


# --------------------------------------------------------------------------- replica → owner: ledger ingest
class RecordedItem(Strict):
    """What the ledger keeps of a scored item (`VerifyItem` without the completion and the reference)."""

    id: str = ""
    domain: Domain
    prompt_id: str = Field(min_length=1)
    step: LedgerBigint | None = None
    policy_version: LedgerBigint | None = None
    sample_index: LedgerInteger | None = None
    truncated: WireBool | None = None
    completion_tokens: LedgerBigint | None = None


class IngestRow(Strict):
    key: str = Field(min_length=1, max_length=MAX_KEY_CHARS, description="the scoring request's idempotency key")
    index: WireInt = Field(ge=0, le=2**31 - 1, description="the item's index within that request")
    item: RecordedItem
    verdict: Verdict


class LedgerIngestRequest(Strict):
    rows: list[IngestRow] = Field(max_length=65536, description="verdict rows to commit, each (key, index) once")


class ReplayedRow(Strict):
    row: int = Field(description="position in the request's rows")
    verdict: Verdict = Field(description="the verdict recorded when this (key, index) was first committed")


class LedgerIngestResponse(Strict):
    recorded: int = Field(description="rows appended to attempts by this request (committed before the answer)")
    replayed: list[ReplayedRow] = Field(default_factory=list, description="rows recorded before: not appended")
