"""HTTP models of the episode routes (`/v1/episodes`): what the server and `scalerl.env.episode_client` exchange.

The episode's own records (`EpisodeStep`, `EpisodeMessage`, `EpisodeLimits`) are the contract's
(`scalerl.env.contracts.episodes`), used as they are; these models only wrap them. No FastAPI import, so
the client can use them without loading the server.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from scalerl.env.contracts.episodes import EpisodeLimits, EpisodeMessage, EpisodeStep
from scalerl.env.contracts.records import ProblemRecord, Strict

EPISODES_PATH = "/v1/episodes"
MAX_ACTION_CHARS = 1_000_000  # one model turn; the body bound (limits.max_body_bytes) applies as well


class EpisodeCreateRequest(Strict):
    environment: str = Field(min_length=1, max_length=200, description="an installed environment "
                             "(the scalerl.environments entry-point group), e.g. code-feedback or math-tool")
    problem: ProblemRecord = Field(description="the problem of the episode; its domain must be the environment's")
    limits: EpisodeLimits | None = Field(default=None, description="overrides of the environment's limits: "
                                         "only the fields given replace the environment's own, within the "
                                         "contract's bounds")


class EpisodeCreated(Strict):
    episode_id: str = Field(description="the episode's session id (unguessable); name it in every later call")
    environment: str
    limits: EpisodeLimits = Field(description="the limits in force: the environment's, with the request's overrides")
    step: EpisodeStep = Field(description="the first observation (turn 0)")


class EpisodeStepRequest(Strict):
    action: str = Field(max_length=MAX_ACTION_CHARS, description="the model's text for this turn")
    turn: int = Field(ge=0, le=1_000_000, description="the turn this action answers: the `turn` of the last "
                      "step received. A step already applied (a retry) is answered with its first result, "
                      "not applied again")


class EpisodeState(Strict):
    episode_id: str
    environment: str
    prompt_id: str
    turn: int = Field(description="model actions applied so far")
    done: bool
    reward: float | None = None
    limits: EpisodeLimits
    messages: list[EpisodeMessage] = Field(description="the transcript: the first observation, then each action "
                                           "(role assistant) and the observation it got")
    info: dict[str, Any] = Field(default_factory=dict, description="the last step's counters (tool calls, "
                                 "feedback turns)")


class EpisodeClosed(Strict):
    episode_id: str
    turn: int = Field(description="model actions applied before the close")
    done: bool = Field(description="whether the episode had ended (and was recorded) before the close")
