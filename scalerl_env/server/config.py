"""Reward-server settings: one pydantic model, the one source of truth for every server default.

`ServerConfig` embeds the verifier settings (`verifiers.config.VerifierConfig`), so one YAML file
configures the whole service. Load it with `scalerl_env.contracts.config.load_config(ServerConfig, path, overrides)`.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from scalerl_env.contracts.records import Strict
from scalerl_env.server.auth import SecurityConfig
from verifiers.config import VerifierConfig


class ServerLimits(Strict):
    """Admission control. Past these the server answers 4xx/503 instead of queueing without bound."""

    max_items_in_flight: int = Field(
        default=1024, ge=1, description="items admitted and not yet answered; past it, 503 + Retry-After"
    )
    max_batch_items: int = Field(default=1024, ge=1, description="items in one request; past it, 413")
    max_body_bytes: int = Field(default=32 << 20, ge=1024, description="request body size; past it, 413")
    request_deadline_s: float = Field(
        default=300.0, gt=0, description="a request still unscored after this many seconds gets 504"
    )
    retry_after_s: int = Field(default=1, ge=1, description="the Retry-After header sent with 503")
    max_connections: int = Field(
        default=1024, ge=1, description="open connections/requests uvicorn accepts; past it, 503 (bounds body memory)"
    )
    concurrent_batches: int = Field(
        default=64, ge=1, le=1024, description="admitted requests handed to the verifier pool at once"
    )

    @model_validator(mode="after")
    def _batch_fits(self) -> ServerLimits:
        if self.max_batch_items > self.max_items_in_flight:
            raise ValueError("max_batch_items must not exceed max_items_in_flight (such a batch could never run)")
        return self


class ServerConfig(Strict):
    host: str = Field(default="127.0.0.1", description="bind address; loopback unless you mean to expose it")
    port: int = Field(default=8000, ge=0, le=65535)
    ledger: str | None = Field(default=None, description="DuckDB ledger file; verdicts with a prompt_id go there")
    drain_timeout_s: float = Field(
        default=30.0, gt=0, description="on SIGTERM, how long in-flight requests may take to finish"
    )
    ledger_query_timeout_s: float = Field(default=10.0, gt=0, description="default for /v1/ledger/query")
    max_ledger_query_timeout_s: float = Field(default=60.0, gt=0, description="cap on a query's timeout_s")
    max_ledger_rows: int = Field(default=100_000, ge=1, description="rows returned by one ledger query")
    limits: ServerLimits = Field(default_factory=ServerLimits)
    security: SecurityConfig = Field(default_factory=SecurityConfig)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
