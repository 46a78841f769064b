"""Reward-server settings: one pydantic model, the one source of truth for every server default.

`ServerConfig` embeds the verifier settings (`scalerl.verifiers.verifier_config.VerifierConfig`), so one
YAML file configures the whole service. Load it with
`scalerl.env.contracts.config_loader.load_config(ServerConfig, path, overrides)`.
"""

from __future__ import annotations

from pydantic import Field, model_validator
from scalerl.curriculum.ledger.ledger_config import LedgerConfig
from scalerl.curriculum.ledger.retirement import RetirementConfig
from scalerl.env.contracts.records import Strict
from scalerl.env.server.auth import SecurityConfig
from scalerl.verifiers.verifier_config import VerifierConfig


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


class OwnerLinkConfig(Strict):
    """Replica mode (`ledger_owner`): how verdict rows travel to the ledger owner (scalerl.env.server.owner_link)."""

    max_buffered_rows: int = Field(
        default=65536, ge=1, description="rows waiting for the owner's commit; past it, scoring requests get 503")
    batch_rows: int = Field(default=4096, ge=1, le=65536, description="rows sent in one POST /v1/ledger/ingest at most")
    wait_s: float = Field(
        default=30.0, gt=0, description="how long a scoring request waits for the owner's commit before 503 "
                                        "(its rows stay buffered and are still sent)")
    timeout_s: float = Field(default=10.0, gt=0, description="HTTP timeout of one forward to the owner")
    backoff_s: float = Field(default=0.1, gt=0, description="first pause after a failed forward (doubles)")
    max_backoff_s: float = Field(default=2.0, gt=0, description="longest pause between forwards that fail")


class EpisodeServerConfig(Strict):
    """`episodes:` of ServerConfig: multi-turn episodes served over HTTP (scalerl.env.server.episode_routes)."""

    max_open: int = Field(default=256, ge=1, description="episodes open at once; past it, creating one gets "
                                                         "503 + Retry-After")
    idle_timeout_s: float = Field(default=600.0, gt=0, description="an episode untouched this long is closed "
                                                                   "and its sandboxes freed; a later step gets 410")
    concurrent_steps: int = Field(default=16, ge=1, le=1024, description="environment calls (open, step, close) "
                                                                        "running at once, on their own threads")


class ServerConfig(Strict):
    host: str = Field(default="127.0.0.1", description="bind address; loopback unless you mean to expose it")
    port: int = Field(default=8000, ge=0, le=65535)
    ledger: str | None = Field(default=None, description="DuckDB ledger file; verdicts with a prompt_id go there")
    ledger_owner: str | None = Field(
        default=None, description="replica mode: URL of the server holding the ledger (`--ledger`); verdicts "
                                  "with a prompt_id are committed there before the answer, ledger queries proxied")
    owner: OwnerLinkConfig = Field(default_factory=OwnerLinkConfig)
    ledger_retirement: RetirementConfig = Field(
        default_factory=RetirementConfig,
        description="the ledger's retirement rule; a trainer that scores one sample per request (veRL) wants "
                    "window=all with min_samples = its group size, so a first correct sample retires nothing")
    ledger_settings: LedgerConfig = Field(
        default_factory=LedgerConfig, description="what the ledger keeps beyond verdicts (as `ledger.*` of a run)")
    drain_timeout_s: float = Field(
        default=30.0, gt=0, description="on SIGTERM, how long in-flight requests may take to finish"
    )
    ledger_query_timeout_s: float = Field(default=10.0, gt=0, description="default for /v1/ledger/query")
    max_ledger_query_timeout_s: float = Field(default=60.0, gt=0, description="cap on a query's timeout_s")
    max_ledger_rows: int = Field(default=100_000, ge=1, description="rows returned by one ledger query")
    limits: ServerLimits = Field(default_factory=ServerLimits)
    episodes: EpisodeServerConfig = Field(default_factory=EpisodeServerConfig)
    security: SecurityConfig = Field(default_factory=SecurityConfig)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)

    @model_validator(mode="after")
    def _one_ledger(self) -> ServerConfig:
        if self.ledger and self.ledger_owner:
            raise ValueError("ledger_owner: give --ledger FILE (this process owns the ledger) or "
                             "--ledger-owner URL (a replica forwarding to the owner), not both")
        if self.ledger_owner and not self.ledger_owner.startswith(("http://", "https://")):
            raise ValueError(f"ledger_owner: expected an http:// or https:// URL, got {self.ledger_owner!r}")
        return self
