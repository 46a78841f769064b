"""A small multi-turn environment for the adapter tests, installed as a plug-in of `scalerl.environments`.

`guess`: the model must say the problem's `answer`. A wrong action gets the feedback `wrong, try again`
until `max_turns`; the right one ends the episode with reward 1. Every step is appended as a JSON line
to the file named by `GUESS_LOG_ENV` (when set), so a test sees what the environment saw, also when the
environment runs in a server process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from scalerl.env.contracts.episodes import EnvironmentSpec, EpisodeLimits, EpisodeMessage, EpisodeStep
from scalerl.env.contracts.records import ProblemRecord, Verdict

from tests.support.plugin_domain import install_plugin

GUESS_LOG_ENV = "SCALERL_GUESS_LOG"
FEEDBACK = "wrong, try again"


class GuessEpisode:
    def __init__(self, problem: ProblemRecord, limits: EpisodeLimits) -> None:
        self.problem, self.limits, self.turn, self.closed = problem, limits, 0, False

    def reset(self) -> EpisodeStep:
        return EpisodeStep(observation=[EpisodeMessage(role="user", content=self.problem.prompt[-1].content)])

    def step(self, action_text: str) -> EpisodeStep:
        self.turn += 1
        right = action_text.strip() == self.problem.answer
        if right or self.turn >= self.limits.max_turns:
            verdict = Verdict.of("correct" if right else "wrong", id=self.problem.prompt_id)
            out = EpisodeStep(done=True, reward=verdict.reward, verdict=verdict, turn=self.turn,
                              info={"feedback_turns": self.turn - 1})
        else:
            out = EpisodeStep(observation=[EpisodeMessage(role="tool", content=FEEDBACK)], turn=self.turn)
        self._log(action_text, out)
        return out

    def _log(self, action_text: str, out: EpisodeStep) -> None:
        path = os.environ.get(GUESS_LOG_ENV)
        if path:
            line = {"prompt_id": self.problem.prompt_id, "turn": out.turn, "action": action_text, "done": out.done,
                    "reward": out.reward}
            with open(path, "a") as log:
                log.write(json.dumps(line) + "\n")

    def close(self) -> None:
        self.closed = True


SPEC = EnvironmentSpec(name="guess", domain="math", description="say the answer; wrong guesses get feedback",
                       open=lambda problem, limits, config: GuessEpisode(problem, limits),
                       limits=EpisodeLimits(max_turns=2))


def install_guess_environment(root: Path) -> Path:
    """A dist-info under `root` whose entry point registers `guess` (this module): put `root` on
    PYTHONPATH (and the repository, for `tests`) and the registry finds it, as pip would install it."""
    return install_plugin(root, dist="guess-env", group="scalerl.environments", name="guess",
                          target="tests.support.guess_environment:SPEC")
