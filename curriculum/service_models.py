"""Messages of the curriculum service (`scalerl.curriculum.service`), shared by its HTTP routes and client.

Every model is `Strict` (unknown fields are errors) and its numbers and flags are JSON's (`false` is not
0). Rules between fields (a rank below `world_size`, exactly one of `parquet` / `records`) are stated in
the field descriptions (the reward server's OpenAPI document states those JSON Schema can,
`scalerl.env.server.openapi_rules`), checked by the service and reported with the field's name
(`SetInputError`), which the routes answer as 422; a field naming what is not there as 404.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field
from scalerl.env.contracts.records import (
    JSON_INTEGER,
    JSON_NUMBER,
    JSON_SAFE_INT,
    ChatMessage,
    CodeTests,
    Domain,
    Limits,
    Strict,
    WireBool,
    WireFloat,
    WireInt,
)

SET_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
Split = Literal["train", "heldout"]


class SetRecord(Strict):
    """One prompt of a set. With `prompt` (and `answer` or `tests`) it is a whole problem and a draw hands
    its fields to the trainer; without, the set holds ids only and the trainer looks the prompt up itself."""

    prompt_id: str = Field(min_length=1, max_length=512)
    domain: Domain
    source: str = Field(default="inline", min_length=1, max_length=256)
    split: Split = Field(default="train", description="heldout: in the set, never drawn")
    prompt: list[ChatMessage] | None = Field(default=None, min_length=1)
    answer: str | None = None
    tests: CodeTests | None = None
    limits: Limits | None = None


class RegisterSetRequest(Strict):
    name: str = Field(pattern=SET_NAME, description="the set's name in the routes (/v1/curriculum/sets/NAME)")
    parquet: str | None = Field(default=None, description="a prepared Parquet (verl schema, `scalerl-env data "
                                "prepare`) on the server's file system: the training prompts (404 if the server "
                                "has no such file)")
    heldout_parquet: str | None = Field(default=None, description="with `parquet`: held-out prompts (never drawn)")
    records: list[SetRecord] | None = Field(default=None, max_length=1_000_000, description=(
        "instead of `parquet`: the prompts inline; prompt ids unique, at least one of split `train`"))
    seed: WireInt = Field(default=0, ge=0, le=JSON_SAFE_INT,
                          description="the sampler's seed (pipeline.seed of `scalerl train`)")
    domain_weights: dict[str, Annotated[float, Field(ge=0), JSON_NUMBER]] = Field(
        default_factory=dict, description="mixing weights (data.domain_weights); a positive weight names a domain "
        "of the set's training prompts, at least one is positive; empty = equal over the set's domains")
    curriculum: dict[str, Any] = Field(
        default_factory=dict, description="`curriculum.*` settings of `scalerl train` (docs/curriculum.md), nested "
        '({"priority": {"mode": "learnability"}}) or dotted ({"priority.mode": "learnability"}); '
        "`retirement` is the server ledger's rule and cannot be set per set")


class SetSummary(Strict):
    name: str
    seed: int
    domain_weights: dict[str, float] = Field(description="the weights the sampler mixes by (resolved)")
    train: int = Field(description="training prompts")
    heldout: int = Field(description="held-out prompts (never drawn)")
    retired: int = Field(description="training prompts retired by the ledger's rule")
    batches: int = Field(description="sampler batches drawn so far (the clock of curriculum.stages)")
    draws: int = Field(description="draws made (distinct draw_id values)")
    created: bool = Field(default=False, description="register: true when this call created the set")


class SetList(Strict):
    sets: list[SetSummary]


class SetDomainCounts(Strict):
    """One domain's prompts in a set (`SetState.domains`)."""

    train: int
    heldout: int
    retired: int
    active: int = Field(description="training prompts not retired")
    epoch: int = Field(description="the domain's current epoch (-1 before its first draw)")


class SetState(Strict):
    summary: SetSummary
    settings: dict[str, Any] = Field(description="the resolved curriculum.* settings (every default filled in)")
    domains: dict[str, SetDomainCounts]
    retired_ids: list[str] = Field(description="retired training prompts of the set, in retirement order")
    weights: dict[str, float] = Field(description="current domain weights (mixing.mode=learning_progress moves them)")
    gauges: dict[str, float] = Field(description="the strategies' gauges at the last draw (p_easy, p_hard, stage)")
    events: dict[str, int] = Field(description="strategy events since the server started (skipped_*, benched_*, ...)")
    stage: int = Field(description="index of the curriculum stage the next draw is made under")


class DrawRequest(Strict):
    draw_id: WireInt = Field(ge=0, le=JSON_SAFE_INT,
                             description="shared by the ranks of one draw (e.g. the training step)")
    rank: WireInt = Field(default=0, ge=0, description="this rank (0 .. world_size - 1)")
    world_size: WireInt = Field(default=1, ge=1, le=4096)
    n: WireInt = Field(ge=1, le=65_536, description="prompts for this rank")


class DrawnPrompt(Strict):
    prompt_id: str
    domain: str
    source: str
    prompt: list[ChatMessage] | None = Field(default=None, description="null for a set registered with ids only")
    answer: str | None = None
    tests: CodeTests | None = None
    limits: Limits | None = None


class DrawResponse(Strict):
    name: str
    draw_id: int
    rank: int
    world_size: int
    batch: int = Field(description="the sampler batch the draw came from (1-based)")
    stage: int = Field(description="the curriculum stage the draw was made under")
    prompts: list[DrawnPrompt]


class ReportGroup(Strict):
    prompt_id: str = Field(min_length=1)
    rewards: list[WireFloat] = Field(min_length=1, max_length=65_536, description="one reward per sample of the group")
    correct: list[WireBool] | None = Field(
        default=None, description="one per reward; default: reward >= the reward table's reward for correct (1.0)")


class ReportRequest(Strict):
    groups: list[ReportGroup] = Field(min_length=1, max_length=65_536)
    step: Annotated[int, Field(ge=0, le=JSON_SAFE_INT), JSON_INTEGER] | None = Field(default=None, description=(
        "the ledger step of these groups (pass the draw_id); default: the set's batch count, the batch the "
        "latest draw came from"))


class ReportResponse(Strict):
    recorded: int = Field(description="samples committed to the ledger")
    groups: int
    zero_variance: int = Field(description="groups whose rewards were all equal")
    retired: list[str] = Field(description="prompts this report retired (the ledger's rule)")
