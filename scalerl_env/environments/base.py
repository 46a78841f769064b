"""What the built-in episodes share: turn and character budgets, truncation, the episode's own sandbox.

`TurnEpisode` runs the contract (`scalerl.env.contracts.episodes.Episode`) for an environment that only says
how it opens (`_opening`), how it answers one action (`_respond`: an observation, or `Ended`) and how
it scores the last action (`_score`). It guarantees: `reset` once and first; at most `max_turns`
actions, the last scored whatever it holds; one observation cut to `max_observation_chars` (head and
tail kept, with a marker); the environment's answers together (not the problem's prompt) within
`max_env_chars`, past which the episode ends and the last action is scored; `close()` idempotent and
safe from another thread while a step runs (it kills the run in flight: that step ends `error`).

`EpisodeSandbox` is one episode's sandbox: a one-slot `CodeVerifier`, started on the episode's first
run and killed by `close()`. Every run is a fresh sandboxed process (scalerl.verifiers.code.sandbox), so
nothing an episode's program leaves (files, processes, environment) reaches another run or episode.

Not guaranteed: the episode's token length (a trainer bounds it with its own length budget).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Literal

from scalerl.env.contracts.episodes import EpisodeLimits, EpisodeMessage, EpisodeStep
from scalerl.env.contracts.records import Limits, ProblemRecord, Status, Verdict
from scalerl.verifiers.verifier_config import VerifierConfig

Role = Literal["user", "tool"]


class EpisodeStateError(RuntimeError):
    """A call out of order: `step` before `reset` or after the end, `reset` twice, any call after `close`."""


@dataclass(frozen=True)
class Ended:
    """`_respond`'s answer when the action ends the episode; `reason` goes to `info["ended"]`."""

    reason: str


def truncate(text: str, limit: int) -> str:
    """`text` when it fits in `limit` characters; else its head and tail around a marker saying how many
    characters were cut, `limit` characters in all (a traceback's end and an output's start both matter)."""
    if len(text) <= limit:
        return text
    room = limit
    for _ in range(3):  # the marker's length depends on the count it states: settle both
        marker = f"\n... [{len(text) - room} characters cut] ...\n"
        room = max(limit - len(marker), 0)
    head = room - room // 2
    return (text[:head] + marker + text[len(text) - room // 2:])[:limit]


class EpisodeSandbox:
    """One episode's sandbox (see the module docstring); `get()` raises `RuntimeError` after `close()`."""

    def __init__(self, config: VerifierConfig) -> None:
        self._config = config.code.model_copy(update={"slots": 1})  # an episode runs one program at a time
        self._verifier: Any = None
        self._closed = False
        self._lock = threading.Lock()

    def get(self) -> Any:
        """The episode's `CodeVerifier`, started on first use; raises `SandboxUnavailable` on a host below
        the configured level and `RuntimeError` once closed."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the episode is closed")
            if self._verifier is None:
                from scalerl.verifiers.code.judge import CodeVerifier  # the sandbox loads on the first run

                self._verifier = CodeVerifier(self._config)
            return self._verifier

    def close(self) -> None:
        with self._lock:
            self._closed = True
            verifier, self._verifier = self._verifier, None
        if verifier is not None:
            verifier.close()


class TurnEpisode:
    """The contract's bookkeeping around three hooks (module docstring). Subclasses set `ROLE` (the role of
    the environment's messages) and `PROTOCOL` (appended to the problem's last user message)."""

    ROLE: Role = "user"
    PROTOCOL = ""

    def __init__(self, problem: ProblemRecord, limits: EpisodeLimits, verifier_config: VerifierConfig | None):
        self.problem, self.limits = problem, limits
        self.config = verifier_config or VerifierConfig()
        self.sandbox_limits: Limits = limits.sandbox or problem.limits or Limits()
        self.sandbox = EpisodeSandbox(self.config)
        self.info: dict[str, Any] = {"tool_calls": 0, "tool_errors": 0, "feedback_turns": 0, "env_chars": 0}
        self.turn = 0
        self._started = self._done = self._closed = False
        self._step_lock = threading.Lock()

    # ------------------------------------------------------------------------------------------ hooks
    def _respond(self, action: str) -> str | Ended:
        raise NotImplementedError

    def _score(self, action: str) -> Verdict:
        raise NotImplementedError

    # ------------------------------------------------------------------------------------------ contract
    def reset(self) -> EpisodeStep:
        with self._step_lock:
            self._check(reset=True)
            self._started = True
            return EpisodeStep(observation=self._opening(), turn=0, info=dict(self.info))

    def step(self, action_text: str) -> EpisodeStep:
        with self._step_lock:
            self._check()
            self.turn += 1
            if self.turn >= self.limits.max_turns:
                return self._end(action_text, "max_turns")
            reply = self._respond(action_text)
            if isinstance(reply, Ended):
                return self._end(action_text, reply.reason)
            text = truncate(reply, self.limits.max_observation_chars)
            if self.info["env_chars"] + len(text) > self.limits.max_env_chars:
                return self._end(action_text, "max_env_chars")
            self.info["env_chars"] += len(text)
            return EpisodeStep(observation=[EpisodeMessage(role=self.ROLE, content=text)], turn=self.turn,
                               info=dict(self.info))

    def close(self) -> None:
        """Kill what runs and free the sandbox; idempotent, safe while a step runs in another thread."""
        self._closed = True
        self.sandbox.close()

    # ------------------------------------------------------------------------------------------ internals
    def _opening(self) -> list[EpisodeMessage]:
        """The problem's messages, the domain's instruction and the protocol appended to the last user one
        (with `limits.brief`: the problem's messages alone)."""
        from scalerl.env.contracts.domains import domain

        prompt = domain(self.problem.domain).prompt
        messages = [EpisodeMessage(role=m.role, content=m.content) for m in self.problem.prompt]
        if self.limits.brief:  # as a small model sees the problem single-turn (no template, no instruction)
            return messages
        last = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
        if last is not None:
            text = messages[last].content
            if prompt.instruction and prompt.marker not in text:
                text = f"{text}\n{prompt.instruction}"
            messages[last] = EpisodeMessage(role="user", content=f"{text}\n{self.PROTOCOL}".rstrip())
        if prompt.system and not any(m.role == "system" for m in messages):
            messages.insert(0, EpisodeMessage(role="system", content=prompt.system))
        return messages

    def _end(self, action: str, reason: str) -> EpisodeStep:
        self._done = True
        try:
            verdict = self._score(action)
        except Exception as exc:  # the environment's failure, never the model's: an `error` verdict
            verdict = Verdict.of(Status.error, rewards=self.config.rewards,
                                 details={"reason": f"{type(exc).__name__}: {exc}"})
        self.sandbox.close()  # nothing runs after the end; the client's close() stays harmless
        self.info["ended"] = reason
        return EpisodeStep(done=True, reward=verdict.reward, verdict=verdict, turn=self.turn, info=dict(self.info))

    def _check(self, reset: bool = False) -> None:
        if self._closed:
            raise EpisodeStateError("the episode is closed")
        if reset and self._started:
            raise EpisodeStateError("reset is called once, first")
        if not reset and not self._started:
            raise EpisodeStateError("step before reset")
        if self._done:
            raise EpisodeStateError("the episode is over")
