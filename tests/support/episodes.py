"""Play a scripted episode of an installed environment: the steps a test reads."""

from __future__ import annotations

from typing import Any

from scalerl.env.contracts.episodes import EpisodeStep, environment
from scalerl.env.contracts.records import ProblemRecord


def play(name: str, problem: ProblemRecord, actions: list[str], **limits: Any) -> list[EpisodeStep]:
    """Reset, then the scripted actions until the episode ends; every step returned, the reset's first.
    `limits` override the environment's own `EpisodeLimits` fields."""
    spec = environment(name)
    episode = spec.open(problem, spec.limits.model_copy(update=limits), None)
    try:
        steps = [episode.reset()]
        for action in actions:
            steps.append(episode.step(action))
            if steps[-1].done:
                break
        return steps
    finally:
        episode.close()
