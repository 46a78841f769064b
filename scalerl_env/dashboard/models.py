"""The dashboard's JSON bodies: one pydantic model per route (every model forbids unknown fields).

They are the contract between the routes and the pages (and any script reading the same routes); they
appear in the OpenAPI document of `scalerl dash`. Nothing here reads files or the ledger.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(Strict):
    """An error answer (404: no run folder, prompt or page; 503: the ledger query failed)."""

    detail: str


class Info(Strict):
    """What this dashboard serves: a run folder (or none: a reward server's ledger only), compared runs."""

    run: str | None = Field(description="the run folder's name; null when serving a reward server's ledger only")
    ledger: str | None = Field(description="which ledger the Ledger page reads (path, 'server', or null)")
    compare: list[str] = Field(description="the run folders of the Compare page")


class Series(Strict):
    """One named line: x and y of the same length (y holds null where a step lacks the key)."""

    name: str
    x: list[float]
    y: list[float | None]
    total: int = Field(default=0, description="points before thinning to the route's bound (= len(x) if none)")


class CurveSet(Strict):
    """A domain's held-out points against compute, its fitted sigmoid (if any) and the band around it."""

    domain: str
    points: Series = Field(description="held-out pass rate against compute_device_s, from metrics.jsonl")
    fit: Series | None = Field(default=None, description="the fitted curve from curves/<domain>.json")
    band_low: list[float] | None = Field(default=None, description="lower edge of the fit's confidence band")
    band_high: list[float] | None = None
    fit_max_compute: float | None = Field(default=None, description="past this compute the curve is extrapolated")
    asymptote: float | None = Field(default=None, description="the fit's A")
    warnings: list[str] = Field(default=[], description="the fit's own warnings (A at its bound, ...), as "
                                "`scalerl fit` prints them")
    fit_error: str | None = None
    x_label: str = Field(description="the compute axis with its unit")
    y_range: tuple[float, float] = Field(description="the pass-rate axis: from 0 to the data, never past 1")


class Overview(Strict):
    run: str
    steps: int = Field(description="step lines in metrics.jsonl")
    validations: int = Field(description="validation lines in metrics.jsonl")
    domains: list[str]
    curves: list[CurveSet]
    step_series: list[Series] = Field(description="per-step metrics against step")
    second_opinion: list[Series] = Field(description="per domain, the running false-negative estimate against "
                                         "step: negatives the second opinion accepted / negatives it re-checked")


class DomainCounts(Strict):
    domain: str
    prompts: int
    attempts: int
    retired: int
    never_drawn: int = Field(description="in the pool (problems table), no attempt recorded")
    benched: int | None = Field(description="drawn, not retired, no attempt in the last quarter of the steps so "
                                "far; null when the run has no bench strategy (or it is not known)")


class RunSettings(Strict):
    """What the Ledger page needs from a run's `config.yaml` (unknown without a run folder)."""

    samples_per_prompt: int | None = Field(default=None, description="pipeline.samples_per_prompt")
    bench: bool = Field(default=False, description="whether the run benches prompts (curriculum.bench, or a "
                        "stage's drop_above)")


class Histogram(Strict):
    domain: str
    step: int
    counts: list[int] = Field(description="prompts per bin of `LedgerView.bins` (pass rate of the attempts up "
                              "to `step`, rounded to the nearest k/n)")


class SourceDifficulty(Strict):
    source: str
    domain: str
    prompts: int
    drawn: int
    mean_pass_rate: float | None = Field(description="mean pass rate of the drawn prompts")
    prior: float | None = Field(description="mean difficulty_prior of the source's prompts")


class LedgerView(Strict):
    available: bool
    reason: str | None = Field(default=None, description="why the ledger cannot be read, when not available")
    attempts: int = 0
    bins: list[str] = Field(default=[], description="the histogram's bins: k/n for the samples per prompt n, the "
                            "rates one group can have")
    counts: list[DomainCounts] = []
    histograms: list[Histogram] = []
    sources: list[SourceDifficulty] = []


class PromptHit(Strict):
    prompt_id: str
    domain: str
    text: str
    attempts: int


class PromptStep(Strict):
    step: int | None
    attempts: int
    correct: int


class PromptHistory(Strict):
    prompt_id: str
    domain: str
    source: str
    text: str
    attempts: int
    pass_rate: float | None
    retired: bool
    retired_step: int | None
    steps: list[PromptStep]


class Rollout(Strict):
    kind: str
    step: int
    prompt_id: str
    domain: str
    source: str | None = None
    sample_index: int | None = None
    status: str
    reward: float | None
    truncated: bool | None
    finish_reason: str | None = None
    completion_tokens: int | None
    completion: str
    prompt: str | None = Field(default=None, description="the prompt's text, from the ledger when it is readable")
    why: str | None = Field(default=None, description="the verdict's reason, from its details: passed/total tests "
                            "and the first failing test's outcome and error (code), the extracted answer (math)")
    stdout: str | None = Field(default=None, description="the sandbox's stdout (head) of the first failing test; "
                               "null when the line carries none (not code, or a log without details)")
    stderr: str | None = Field(default=None, description="the sandbox's stderr (tail) of the first failing test")
    details: dict[str, Any] | None = Field(default=None, description="the verdict's details as logged (bounded)")


class RolloutPage(Strict):
    total: int = Field(description="lines matching the filter")
    offset: int
    limit: int
    rows: list[Rollout]
    domains: list[str] = Field(description="every domain in rollouts.jsonl (filter choices)")
    statuses: list[str] = Field(description="every verdict status in rollouts.jsonl")


class CompareView(Strict):
    runs: list[str]
    key: str
    x: str = Field(description="the x axis: 'step', or 'compute_device_s' for held-out keys (val.<domain>)")
    x_label: str = Field(description="the x axis with its unit")
    y_range: tuple[float, float] | None = Field(default=None, description="held-out keys: the pass-rate axis")
    series: list[Series]
    keys: list[str] = Field(description="keys every compared run has (choices)")
