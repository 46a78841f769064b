"""A scripted multi-turn environment for trainer tests: `retry-math`, registered by `install(monkeypatch)`.

The episode shows the problem's prompt; an action whose answer (the text in `\\boxed{}`, else the stripped
text) equals the problem's ends it `correct`;
any other gets the feedback message `FEEDBACK` (role `user`) until `limits.max_turns` actions, when the last
one is scored `wrong`. `info` counts `feedback_turns` and `tool_calls` (every action is one call) as the
episode's totals so far. Every opened episode is kept in `OPENED`, so a test can check they were closed.
"""

from __future__ import annotations

import re
from typing import Any

from scalerl.env.contracts import episodes
from scalerl.env.contracts.episodes import EnvironmentSpec, EpisodeLimits, EpisodeMessage, EpisodeStep
from scalerl.env.contracts.records import ProblemRecord, Verdict

NAME = "retry-math"
FEEDBACK = "no, again"
OPENED: list[RetryEpisode] = []


class RetryEpisode:
    def __init__(self, problem: ProblemRecord, limits: EpisodeLimits) -> None:
        self.problem, self.limits = problem, limits
        self.turn = 0
        self.actions: list[str] = []
        self.closed = 0

    def _info(self) -> dict[str, Any]:
        return {"tool_calls": self.turn, "feedback_turns": max(0, self.turn - 1)}

    def reset(self) -> EpisodeStep:
        return EpisodeStep(observation=[EpisodeMessage(role=m.role, content=m.content) for m in self.problem.prompt])

    def step(self, action_text: str) -> EpisodeStep:
        self.turn += 1
        self.actions.append(action_text)
        boxed = re.search(r"\\boxed\{([^}]*)\}", action_text)
        answer = boxed.group(1) if boxed else action_text
        if answer.strip() == str(self.problem.answer).strip():
            return EpisodeStep(done=True, reward=1.0, verdict=Verdict.of("correct"), turn=self.turn, info=self._info())
        if self.turn >= self.limits.max_turns:
            return EpisodeStep(done=True, reward=0.0, verdict=Verdict.of("wrong"), turn=self.turn, info=self._info())
        info = {**self._info(), "feedback_turns": self.turn}
        return EpisodeStep(observation=[EpisodeMessage(role="user", content=FEEDBACK)], turn=self.turn, info=info)

    def close(self) -> None:
        self.closed += 1


def _open(problem: ProblemRecord, limits: EpisodeLimits, verifier_config: Any) -> RetryEpisode:
    episode = RetryEpisode(problem, limits)
    OPENED.append(episode)
    return episode


SPEC = EnvironmentSpec(name=NAME, domain="math", description="retry a math answer after 'no'", open=_open,
                       limits=EpisodeLimits(max_turns=3))


def install(monkeypatch: Any) -> EnvironmentSpec:
    """Register `retry-math` beside the installed environments for the test (the registry is read through
    `scalerl.env.contracts.episodes.environments`, which `environment(name)` calls)."""
    installed = dict(episodes.environments())
    monkeypatch.setattr(episodes, "environments", lambda: {**installed, NAME: SPEC})
    OPENED.clear()
    return SPEC
