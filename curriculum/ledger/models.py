"""Types the ledger returns and raises, and the unbiased pass@k estimator.

pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"), for a prompt with n
scored samples of which c passed: `1 − C(n−c, k) / C(n, k)`, computed as the stable product
`1 − Π_{i=n−c+1..n} (1 − k/i)`; it is 1.0 when n − c < k. Averaged over prompts for a benchmark figure.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from pydantic import Field
from scalerl.env.contracts.records import Strict

# Longest idempotency key the ledger stores (the reward server's `Idempotency-Key` header and ingest rows).
MAX_KEY_CHARS = 200


class LedgerError(RuntimeError):
    """A ledger operation that cannot be done as asked; the message says why and what to do."""


class ReadOnlyQueryError(LedgerError):
    """SQL from outside that is not a single read statement (SELECT / WITH ... SELECT)."""


class QueryTimeoutError(LedgerError):
    """A query that ran past its time limit and was interrupted."""


class IngestError(LedgerError):
    """A bulk import that was refused as a whole (malformed line, unknown prompt_id, duplicate file)."""


class QueryResult(Strict):
    """The answer to `Ledger.query` (also the body of the server's `/v1/ledger/query`)."""

    columns: list[str]
    rows: list[list[Any]]
    truncated: bool = Field(default=False, description="more rows existed than max_rows")


class PassRate(NamedTuple):
    """One prompt's row of the `pass_rates` view (see `scalerl.curriculum.ledger.schema` for the definitions).
    A NamedTuple: immutable and cheap to build by the ten thousand."""

    prompt_id: str
    domain: str
    attempts: int
    scored: int
    correct: int
    pass_rate: float | None
    last_group_step: int | None
    last_group_scored: int
    last_group_correct: int
    retired: bool
    retired_step: int | None = None

    @property
    def last_group_pass_rate(self) -> float | None:
        return self.last_group_correct / self.last_group_scored if self.last_group_scored else None


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one prompt with n samples, c correct (requires n >= k)."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n} c={c}")
    if k < 1 or n < k:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_pass_at_k(rates: list[PassRate] | tuple[PassRate, ...], k: int) -> float:
    """pass@k averaged over prompts (each prompt's `scored` samples, `correct` of them passed)."""
    if not rates:
        raise ValueError("no prompts")
    return sum(pass_at_k(r.scored, r.correct, k) for r in rates) / len(rates)
