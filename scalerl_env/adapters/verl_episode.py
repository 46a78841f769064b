"""veRL multi-turn adapter: a veRL `BaseTool` whose calls are the actions of a scalerl episode, for veRL's
tool agent loop (`actor_rollout_ref.rollout.multi_turn`, agent `tool_agent`), and the reward function
that reads the episode's verdict.

The tool config file veRL loads (`multi_turn.tool_config_path`):

    tools:
      - class_name: scalerl.env.adapters.verl_episode.ScaleRLEpisodeTool
        config: {type: native, environment: code-feedback, url: "http://127.0.0.1:8010"}

`url` names an OpenEnv server of `scalerl.env.adapters.openenv` (the episodes run there); without it they
run in the agent-loop worker's process. Each dataset row carries its problem record in
`extra_info.tools_kwargs.<tool name>.create_kwargs.problem` (JSON text or an object).

veRL 0.9.1 creates and releases a tool instance around every call, so the episode belongs to the
trajectory (`agent_data.request_id`), not to the instance. Each call steps the episode with the model's
`code` (in a ```python block) and answers with the environment's observation; when the episode ends, the
tool's reward is the verdict's, and the trajectory's extra field `scalerl_episode` (also under
`tool_extra_fields`) records it, which veRL's reward loop passes to `compute_score` in `extra_info`.

Guarantees: an ended episode is closed at once, and later calls of its trajectory answer that it is
over; a tool keeps at most `max_episodes` trajectories (the oldest is closed and forgotten past that);
`compute_score` returns the ended episode's reward. Not guaranteed: that an episode the model never ended
has a verdict: `compute_score` then scores the final response as a single-turn response
(`scalerl.env.adapters.verl.compute_score` against the row's ground truth).
"""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict
from typing import Any
from uuid import uuid4

from pydantic import Field
from scalerl.env.adapters import verl as single_turn
from scalerl.env.adapters.openenv import EPISODE_OVER, TOOL_DESCRIPTION, OpenEnvEpisode, as_problem
from scalerl.env.contracts.episodes import environment
from scalerl.env.contracts.records import Strict

TOOL_CLASS = "ScaleRLEpisodeTool"
EXTRA_KEY = "scalerl_episode"


class EpisodeToolConfig(Strict):
    """The tool's `config` block in veRL's tool config file."""

    type: str = Field(default="native", description="veRL's tool type")
    environment: str = Field(description="an installed environment (scalerl.environments)")
    url: str | None = Field(default=None, description="an OpenEnv server of the adapter; None: in process")
    fence: str | None = Field(default="python", description="code goes to the episode in a ```fence block")
    max_episodes: int = Field(default=1024, ge=1, description="trajectories a tool keeps; the oldest is closed and "
                              "forgotten past it")


def __getattr__(name: str) -> Any:
    # veRL loads the tool as `module.ScaleRLEpisodeTool`; built on first use so importing this module needs no veRL.
    if name == TOOL_CLASS:
        return episode_tool_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_schema(name: str, description: str) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": "the program"}},
                       "required": ["code"]}}}


class EpisodeRun:
    """One trajectory's episode and what it has shown so far."""

    def __init__(self, settings: EpisodeToolConfig, problem: Any) -> None:
        record = as_problem(problem)
        if settings.url:
            self.episode: Any = OpenEnvEpisode(settings.url, record)
        else:
            spec = environment(settings.environment)
            self.episode = spec.open(record, spec.limits, None)
        self.first = self.episode.reset()
        self.done, self.reward, self.turns = False, None, 0

    def step(self, action_text: str) -> tuple[str, dict[str, Any]]:
        out = self.episode.step(action_text)
        self.turns, self.done = out.turn, out.done
        if out.done:
            self.reward = out.reward
            self.episode.close()
        record = {"done": out.done, "reward": out.reward, "turns": out.turn,
                  "status": out.verdict.status.value if out.verdict else None, **out.info}
        return "\n".join(m.content for m in out.observation) or EPISODE_OVER, record


@functools.cache
def episode_tool_class() -> type:
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

    class ScaleRLEpisodeTool(BaseTool):
        def __init__(self, config: dict, tool_schema: Any = None):
            self.settings = EpisodeToolConfig.model_validate(config)
            if tool_schema is None:  # served: the environment is installed where the server runs, maybe not here
                name = self.settings.environment
                described = TOOL_DESCRIPTION if self.settings.url else environment(name).description
                tool_schema = OpenAIFunctionToolSchema.model_validate(default_schema("submit", described))
            super().__init__(config, tool_schema)
            self.problems: dict[str, Any] = {}
            self.runs: OrderedDict[str, EpisodeRun] = OrderedDict()

        async def create(self, instance_id: str | None = None, create_kwargs: dict | None = None, **kwargs: Any):
            instance_id = instance_id or uuid4().hex
            self.problems[instance_id] = (create_kwargs or {}).get("problem")
            return instance_id, ToolResponse()

        async def execute(self, instance_id: str, parameters: dict[str, Any], agent_data: Any = None, **kwargs: Any):
            run = await self._run(agent_data.request_id, self.problems.get(instance_id))
            if run.done:
                return ToolResponse(text=EPISODE_OVER), 0.0, {"done": True}
            code = str(parameters.get("code", ""))
            text = f"```{self.settings.fence}\n{code}\n```" if self.settings.fence else code
            answer, record = await asyncio.to_thread(run.step, text)
            # veRL's reward loop merges the trajectory's extra fields into `extra_info` when it scores in the
            # agent loop, and their `tool_extra_fields` when it scores the batch: the record is in both.
            agent_data.extra_fields[EXTRA_KEY] = record
            agent_data.extra_fields.setdefault("tool_extra_fields", {})[EXTRA_KEY] = record
            return ToolResponse(text=answer), float(run.reward or 0.0) if run.done else 0.0, record

        async def _run(self, key: str, problem: Any) -> EpisodeRun:
            if key not in self.runs:
                if problem is None:
                    raise ValueError("no problem: put it in extra_info.tools_kwargs.<tool>.create_kwargs.problem")
                self.runs[key] = await asyncio.to_thread(EpisodeRun, self.settings, problem)
                while len(self.runs) > self.settings.max_episodes:
                    _, oldest = self.runs.popitem(last=False)
                    oldest.episode.close()
            return self.runs[key]

        async def release(self, instance_id: str, **kwargs: Any) -> None:
            self.problems.pop(instance_id, None)

    ScaleRLEpisodeTool.__module__ = __name__
    return ScaleRLEpisodeTool


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                  **kwargs: Any) -> dict[str, float]:
    """veRL's reward function: the ended episode's reward, else the final response scored single-turn."""
    record = (extra_info or {}).get(EXTRA_KEY)
    if record and record.get("done"):
        reward = float(record["reward"])
        return {"score": reward, "acc": float(record.get("status") == "correct"), "turns": float(record["turns"])}
    return single_turn.compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)
