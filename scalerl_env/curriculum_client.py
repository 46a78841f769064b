"""Python client of the reward server's curriculum routes (`/v1/curriculum/*`, `scalerl.curriculum.service`).

    with CurriculumClient("http://127.0.0.1:8000", "gsm8k") as cur:
        cur.register(parquet="/data/gsm8k.parquet", curriculum={"priority.mode": "learnability"})
        batch = cur.draw(n=8, draw_id=step, rank=rank, world_size=world_size)   # DrawResponse
        cur.report([{"prompt_id": p.prompt_id, "rewards": [1.0, 0.0, 1.0, 1.0]} for p in batch.prompts], step=step)
        cur.state().retired_ids

It is a `RewardClient` (same connection pool, token, retries and errors: `RewardServerError(status,
detail)`), so one object also scores (`verify`). One URL only: the curriculum lives in the ledger of
the server that owns it. Guarantees: what the server guarantees (docs/curriculum.md, "Curriculum as a
service"). `register` and `draw` are idempotent on the server (the same spec, the same `draw_id` and
`rank` give back what the first call made), so besides refused connections and 503s they are also
re-sent after a timeout or a dropped connection; a `report` is not (a re-send would record the samples
twice), so it is re-sent only when it certainly never arrived (refused connection, 503).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scalerl.curriculum.service_models import (
    DrawResponse,
    ReportGroup,
    ReportResponse,
    SetList,
    SetRecord,
    SetState,
    SetSummary,
)
from scalerl.env.client import DEFAULT_URL, RewardClient

PREFIX = "/v1/curriculum/sets"


class CurriculumClient(RewardClient):
    """One problem set of the server's curriculum (`set_name`); `list_sets` sees every set."""

    def __init__(self, base_url: str = DEFAULT_URL, set_name: str = "train", **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        if len(self.urls) != 1:
            raise ValueError(f"the curriculum lives in one server's ledger: give one URL, not {self.urls}")
        self.set_name = set_name

    def _attempts(self, method: str, path: str, key: str | None) -> tuple[Any, dict[str, str]]:
        attempts, headers = super()._attempts(method, path, key)
        if method == "POST" and (path == PREFIX or path.endswith("/draw")):
            attempts.safe = True  # idempotent on the server: a re-send gets what the first send made
        return attempts, headers

    def register(self, *, parquet: str | None = None, heldout_parquet: str | None = None,
                 records: Sequence[SetRecord | Mapping[str, Any]] | None = None, seed: int = 0,
                 domain_weights: Mapping[str, float] | None = None,
                 curriculum: Mapping[str, Any] | None = None) -> SetSummary:
        """Register the set (a Parquet on the server's file system, or inline records); registering the
        same spec again returns the set unchanged (`created` false), so every rank may call it."""
        body: dict[str, Any] = {"name": self.set_name, "seed": seed, "domain_weights": dict(domain_weights or {}),
                                "curriculum": dict(curriculum or {})}
        if parquet is not None:
            body["parquet"] = parquet
        if heldout_parquet is not None:
            body["heldout_parquet"] = heldout_parquet
        if records is not None:
            body["records"] = [r.model_dump(mode="json", exclude_none=True) if isinstance(r, SetRecord) else dict(r)
                               for r in records]
        return SetSummary.model_validate_json(self._request("POST", PREFIX, body).content)

    def draw(self, n: int, *, draw_id: int, rank: int = 0, world_size: int = 1) -> DrawResponse:
        """This rank's `n` prompts of draw `draw_id` (the same `draw_id` on every rank of one step)."""
        body = {"draw_id": draw_id, "rank": rank, "world_size": world_size, "n": n}
        return DrawResponse.model_validate_json(self._request("POST", f"{PREFIX}/{self.set_name}/draw", body).content)

    def report(self, groups: Sequence[ReportGroup | Mapping[str, Any]], *, step: int | None = None) -> ReportResponse:
        """Each group's rewards (one per sample) into the ledger, under `step` (pass the draw_id)."""
        body: dict[str, Any] = {"groups": [g.model_dump(mode="json", exclude_none=True) if isinstance(g, ReportGroup)
                                           else dict(g) for g in groups]}
        if step is not None:
            body["step"] = step
        return ReportResponse.model_validate_json(
            self._request("POST", f"{PREFIX}/{self.set_name}/report", body).content)

    def state(self) -> SetState:
        return SetState.model_validate_json(self._request("GET", f"{PREFIX}/{self.set_name}").content)

    def list_sets(self) -> list[SetSummary]:
        return SetList.model_validate_json(self._request("GET", PREFIX).content).sets
