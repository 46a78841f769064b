"""A test-double environment installed the way pip would (a package and its dist-info on `PYTHONPATH`):
`echo`, on math problems. Each action is answered with `call N: ACTION` (N counts the actions the
environment applied, so a step applied twice shows); `tool:...` counts a tool call; `sleep:S` sleeps S
seconds first; `answer:X` ends the episode, correct when X is the problem's answer; `raise` raises. A
problem whose metadata has `refuse` is refused at open (ValueError). `close()` appends the prompt id to
`$ECHO_CLOSED_LOG`, so a test sees that an episode's resources were freed."""

from __future__ import annotations

from pathlib import Path

from tests.support.plugin_domain import install_plugin

SOURCE = '''
import os
import time

from scalerl.env.contracts.episodes import EnvironmentSpec, EpisodeLimits, EpisodeMessage, EpisodeStep
from scalerl.env.contracts.records import Verdict


class Echo:
    def __init__(self, problem, limits):
        if problem.metadata.get("refuse"):
            raise ValueError("this problem is refused")
        self.problem, self.limits, self.calls, self.tools = problem, limits, 0, 0

    def reset(self):
        return EpisodeStep(observation=[EpisodeMessage(role="user", content=self.problem.prompt[-1].content)])

    def step(self, action):
        self.calls += 1
        if action == "raise":
            raise RuntimeError("the environment broke")
        if action.startswith("sleep:"):
            time.sleep(float(action[6:]))
        self.tools += action.startswith("tool:")
        info = {"tool_calls": self.tools, "calls": self.calls}
        if action.startswith("answer:") or self.calls >= self.limits.max_turns:
            verdict = Verdict.of("correct" if action == "answer:" + self.problem.answer else "wrong")
            return EpisodeStep(done=True, reward=verdict.reward, verdict=verdict, turn=self.calls, info=info)
        message = EpisodeMessage(role="tool", content=f"call {self.calls}: {action}")
        return EpisodeStep(observation=[message], turn=self.calls, info=info)

    def close(self):
        if os.environ.get("ECHO_CLOSED_LOG"):
            with open(os.environ["ECHO_CLOSED_LOG"], "a") as log:
                log.write(self.problem.prompt_id + "\\n")


SPEC = EnvironmentSpec(name="echo", domain="math", description="a test double",
                       open=lambda problem, limits, config: Echo(problem, limits), limits=EpisodeLimits(max_turns=5))
'''


def install_echo_environment(root: Path) -> Path:
    return install_plugin(root, dist="echo-env", group="scalerl.environments", name="echo", target="echo_env:SPEC",
                          package="echo_env", source=SOURCE)
