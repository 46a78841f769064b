"""The episode contract: multi-turn environments, and the registry that finds them.

An episode is a list of messages. The environment opens it on one problem record and gives the first
observation (`Episode.reset`); each action of the model (`Episode.step(action_text)`) gets the next
observation, or the end with a reward and the verdict that decided it. Every environment reads problem
records of one domain (`EnvironmentSpec.domain`) and scores with that domain's verifier, so the pass-rate
ledger, the filters and the curriculum treat an episode as they treat one sample.

Environments are found like domains: through the `scalerl.environments` entry-point group, each entry a
`EnvironmentSpec`. A lab's package declares its own environment exactly as the built-in ones are declared
in the project's `pyproject.toml`:

    [project.entry-points."scalerl.environments"]
    chem-tool = "chem_rlvr.env:SPEC"

Guarantees
- Loaded once per process, on first use (never at import); names are unique (two entry points naming one
  environment are an error naming both); `environment(name)` raises `UnknownEnvironmentError` listing the
  known ones.
- `EpisodeLimits` is the one source of the per-episode limits: turns, environment characters, and the
  sandbox limits of each call the environment makes.

Not guaranteed: that a plug-in's episodes honour their limits or answer an `error` verdict for their own
failures; the built-in ones do.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import Field
from scalerl.env.contracts.plugins import load_specs
from scalerl.env.contracts.records import Limits, ProblemRecord, Strict, Verdict

ENTRY_POINT_GROUP = "scalerl.environments"


class UnknownEnvironmentError(ValueError):
    """An environment name that no installed spec declares."""


class EpisodeMessage(Strict):
    """One message of an episode. `tool` carries what the environment ran for the model (tool output,
    test feedback); environments that target chat templates without a tool role use `user`."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str


class EpisodeLimits(Strict):
    """Per-episode limits. The environment has no tokenizer, so its own text is bounded in characters;
    the trainer bounds the whole episode in tokens (its length budget)."""

    max_turns: int = Field(default=4, ge=1, le=64, description="model actions per episode; the last one is "
                           "scored whatever it holds")
    max_observation_chars: int = Field(default=2_000, ge=64, le=100_000, description="one observation's text "
                                       "past this is cut, with a marker saying how much was cut")
    max_env_chars: int = Field(default=8_000, ge=64, le=1_000_000, description="all observations of an "
                               "episode together; past it the episode ends and the last action is scored")
    sandbox: Limits | None = Field(default=None, description="limits of each sandbox call the environment "
                                   "makes (tool runs, visible tests); None = the problem's or the verifier's")
    brief: bool = Field(default=False, description="short messages for a small model with a short context: "
                        "the opening is the problem's own messages (no instruction or protocol line) and "
                        "feedback is one line")


class EpisodeStep(Strict):
    """What `reset` and `step` return. `observation` holds the messages the environment adds (empty at
    the end). `reward` and `verdict` are set exactly when `done`."""

    observation: list[EpisodeMessage] = Field(default_factory=list)
    done: bool = False
    reward: float | None = None
    verdict: Verdict | None = None
    turn: int = Field(default=0, ge=0, description="model actions taken so far")
    info: dict[str, Any] = Field(default_factory=dict, description="counters the ledger and metrics read: "
                                 "tool_calls, tool_errors, feedback_turns, why the episode ended")


class Episode(Protocol):
    """One episode on one problem. `reset` is called once, first; `step` until a step is `done`;
    `close` always (it frees sandboxes and files, and is safe to call twice)."""

    def reset(self) -> EpisodeStep: ...

    def step(self, action_text: str) -> EpisodeStep: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class EnvironmentSpec:
    """One multi-turn environment. `open(problem, limits, verifier_config)` starts an episode on a
    problem record of `domain`; `verifier_config` is the run's or server's `VerifierConfig` (or None:
    its defaults). The hook imports the environment's code when called, so loading the registry
    imports no sandbox or verifier code."""

    name: str
    domain: str
    description: str
    open: Callable[[ProblemRecord, EpisodeLimits, Any], Episode]
    # The environment's defaults; a request or run may override. A factory: a pydantic model is no dataclass default.
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    rank: int = 100  # order in listings: the built-ins first


@functools.cache
def environments() -> dict[str, EnvironmentSpec]:
    """Every installed environment, by name, in `rank` then name order."""
    return load_specs(ENTRY_POINT_GROUP, EnvironmentSpec, "environment")


def environment(name: str) -> EnvironmentSpec:
    """The installed environment called `name`."""
    found = environments()
    if name not in found:
        known = ", ".join(found) or "none"
        raise UnknownEnvironmentError(f"unknown environment {name!r}; installed: {known}")
    return found[name]
