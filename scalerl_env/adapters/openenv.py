"""OpenEnv adapter: any installed multi-turn environment served as an OpenEnv environment, and the TRL
environment class that plays its episodes through TRL's `GRPOTrainer(environment_factory=...)`.

Server (one environment per process; each WebSocket session of the OpenEnv protocol holds one episode):

    python -m scalerl.env.adapters.openenv --environment code-feedback --port 8010

Trainer side (TRL's documented environment path: the class below wraps the OpenEnv client):

    from scalerl.env.adapters.openenv import episode_reward, tool_environment
    trainer = GRPOTrainer(model=..., train_dataset=dataset, reward_funcs=[episode_reward],
                          environment_factory=tool_environment("http://127.0.0.1:8010"), ...)

The dataset has TRL's `prompt` column and a `problem` column holding the problem record (JSON text or an
object; `problem_rows` builds both from problem records). `reset(problem=...)` opens the episode on it.

Guarantees
- The OpenEnv types (`EpisodeAction`, `EpisodeObservation`, `EpisodeState`) carry the episode contract
  unchanged: an action is the model's text, an observation the messages the environment adds, with
  `done`, `reward` and the verdict set exactly when the episode ends.
- The model sees only the observation messages; verdicts and their details stay with the trainer.
- `episode_reward` ends every episode: a rollout whose model stops calling the tool is stepped with its
  final message until the environment ends it (at most its `max_turns`), so each reward is a verdict.
- `openenv-core` is imported only when a server, an action or a client is built: the light install
  imports this module without it (`.venv-rl` and `make rl-env` install it).

Not guaranteed: a bound on sessions beyond `--max-sessions`, authentication (bind to loopback or put
the server behind a proxy), or that an episode survives the WebSocket that holds it.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Sequence
from typing import Any

from scalerl.env.contracts.episodes import EpisodeLimits, EpisodeStep, environment
from scalerl.env.contracts.records import ProblemRecord

DEFAULT_PORT = 8010
DEFAULT_MAX_SESSIONS = 64
EPISODE_OVER = "The episode is over."
TOOL_DESCRIPTION = "Send code to the environment; it answers with what running it showed."


@functools.cache
def openenv_types() -> tuple[type, type, type]:
    """(EpisodeAction, EpisodeObservation, EpisodeState): the OpenEnv models of the episode contract."""
    from openenv.core.env_server.types import Action, Observation, State
    from pydantic import Field

    class EpisodeAction(Action):
        """One model action: its text, as `Episode.step(action_text)` takes it."""

        text: str = Field(description="the model's message")

    class EpisodeObservation(Observation):
        """What `reset`/`step` return; `done` and `reward` are OpenEnv's own fields."""

        messages: list[dict[str, str]] = Field(default_factory=list, description="role/content the env adds")
        turn: int = Field(default=0, ge=0, description="model actions so far")
        verdict: dict[str, Any] | None = Field(default=None, description="the deciding verdict, when done")
        info: dict[str, Any] = Field(default_factory=dict, description="tool calls, feedback turns, end reason")

    class EpisodeState(State):
        """The session's episode: which environment and problem, how far it went."""

        environment: str = ""
        prompt_id: str | None = None
        max_turns: int = 1
        done: bool = False
        reward: float | None = None

    return EpisodeAction, EpisodeObservation, EpisodeState


def observation_of(step: EpisodeStep) -> Any:
    """The OpenEnv observation of one `EpisodeStep`."""
    _, observation, _ = openenv_types()
    return observation(
        messages=[m.model_dump() for m in step.observation], turn=step.turn, done=step.done, reward=step.reward,
        verdict=step.verdict.model_dump(mode="json") if step.verdict is not None else None, info=step.info,
    )


def as_problem(problem: Any) -> ProblemRecord:
    """A problem record from JSON text, a mapping, or a record."""
    if isinstance(problem, ProblemRecord):
        return problem
    if isinstance(problem, str | bytes):
        return ProblemRecord.model_validate_json(problem)
    return ProblemRecord.model_validate(problem)


@functools.cache
def environment_class() -> type:
    """The OpenEnv `Environment` subclass that holds one episode of a scalerl environment per session."""
    from openenv.core.env_server.interfaces import Environment, EnvironmentMetadata

    _, _, state_type = openenv_types()

    class ScaleRLEnvironment(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True  # each session opens its own episode (own sandbox calls)

        def __init__(self, name: str, limits: EpisodeLimits | None = None, verifier_config: Any = None):
            super().__init__()
            self.spec = environment(name)
            self.limits = limits or self.spec.limits
            self.verifier_config = verifier_config
            self.episode: Any = None
            self._state = state_type(environment=name)

        def reset(self, seed: int | None = None, episode_id: str | None = None, problem: Any = None,
                  **kwargs: Any) -> Any:
            if problem is None:
                raise ValueError("reset needs problem= (a problem record, as JSON text or an object)")
            record = as_problem(problem)
            self.close()
            self.episode = self.spec.open(record, self.limits, self.verifier_config)
            self._state = state_type(environment=self.spec.name, prompt_id=record.prompt_id, episode_id=episode_id,
                                     max_turns=self.limits.max_turns)
            return self._observe(self.episode.reset())

        def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
            if self.episode is None or self._state.done:
                raise ValueError("no open episode: call reset(problem=...) first")
            self._state.step_count += 1
            return self._observe(self.episode.step(action.text))

        def _observe(self, step: EpisodeStep) -> Any:
            self._state.done, self._state.reward = step.done, step.reward
            return observation_of(step)

        @property
        def state(self) -> Any:
            return self._state

        def get_metadata(self) -> EnvironmentMetadata:
            return EnvironmentMetadata(name=self.spec.name, description=self.spec.description, version="1")

        def close(self) -> None:
            if self.episode is not None:
                episode, self.episode = self.episode, None
                episode.close()

    return ScaleRLEnvironment


def create_app(name: str, *, limits: EpisodeLimits | None = None, verifier_config: Any = None,
               max_sessions: int = DEFAULT_MAX_SESSIONS) -> Any:
    """The OpenEnv FastAPI app serving environment `name` (`/ws` sessions, `/health`, `/schema`)."""
    from openenv.core.env_server.http_server import create_app as openenv_app

    spec = environment(name)  # an unknown name fails here, before the server starts
    action, observation, _ = openenv_types()
    env_type = environment_class()
    return openenv_app(lambda: env_type(spec.name, limits, verifier_config), action, observation,
                       env_name=spec.name, max_concurrent_envs=max_sessions)


@functools.cache
def client_class() -> type:
    """The OpenEnv `EnvClient` for these servers (async; `.sync()` gives the blocking one)."""
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient

    action, observation, state = openenv_types()

    class ScaleRLEnvClient(EnvClient):
        def _step_payload(self, act: Any) -> dict[str, Any]:
            return act.model_dump(exclude={"metadata"})

        def _parse_result(self, payload: dict[str, Any]) -> Any:
            obs = observation(**payload.get("observation", {}), done=payload.get("done", False),
                              reward=payload.get("reward"))
            return StepResult(observation=obs, reward=obs.reward, done=obs.done)

        def _parse_state(self, payload: dict[str, Any]) -> Any:
            return state(**payload)

    return ScaleRLEnvClient


class OpenEnvEpisode:
    """The contract's `Episode` over an OpenEnv server of this adapter: one WebSocket session, one
    problem. For trainers that drive episodes themselves (the veRL tool, scripts)."""

    def __init__(self, base_url: str, problem: Any) -> None:
        self.problem = as_problem(problem)
        self.client = client_class()(base_url=base_url).sync()

    def reset(self) -> EpisodeStep:
        return self._step(self.client.reset(problem=self.problem.model_dump(mode="json")))

    def step(self, action_text: str) -> EpisodeStep:
        action, _, _ = openenv_types()
        return self._step(self.client.step(action(text=action_text)))

    def close(self) -> None:
        self.client.close()

    @staticmethod
    def _step(result: Any) -> EpisodeStep:
        obs = result.observation
        return EpisodeStep(observation=obs.messages, done=result.done, reward=result.reward if result.done else None,
                           verdict=obs.verdict, turn=obs.turn, info=obs.info)


def message_text(messages: Sequence[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in messages)


class EpisodeToolEnv:
    """Base of the classes `tool_environment` builds: one OpenEnv session, one episode per `reset`.
    TRL exposes every public method but `reset` as a tool; the subclass adds the one tool."""

    base_url = ""
    fence: str | None = "python"

    def __init__(self) -> None:
        self.client = client_class()(base_url=self.base_url).sync()
        self.reward: float | None = None
        self.verdict: dict[str, Any] | None = None
        self.done = False
        self.turns = 0
        self.max_turns = 1

    def reset(self, problem: Any = None, **columns: Any) -> str | None:
        """Open an episode on the row's `problem`; the row's `prompt` already shows it, so nothing is added."""
        if problem is None:
            raise KeyError(f"the dataset needs a 'problem' column (problem_rows builds it); columns: {sorted(columns)}")
        record = as_problem(problem)
        self.reward, self.verdict, self.done, self.turns = None, None, False, 0
        self._record(self.client.reset(problem=record.model_dump(mode="json")))
        self.max_turns = self.client.state().max_turns
        return None

    def _act(self, text: str) -> str:
        if self.done:
            raise ValueError(f"{EPISODE_OVER} Answer without calling the tool.")
        action, _, _ = openenv_types()
        result = self.client.step(action(text=text))
        self.turns += 1
        self._record(result)
        return message_text(result.observation.messages) or EPISODE_OVER

    def _record(self, result: Any) -> None:
        self.done = result.done
        if result.done:
            self.reward, self.verdict = result.reward, result.observation.verdict

    def _action_text(self, code: str) -> str:
        return f"```{self.fence}\n{code}\n```" if self.fence else code

    def _finish(self, final_text: str) -> float:
        """End the episode with the rollout's final message, repeated until the environment ends it (the
        last action is scored; `max_turns` bounds the repeats); the reward is the deciding verdict's."""
        while not self.done and self.turns < self.max_turns:
            self._act(final_text)
        if not self.done:
            raise RuntimeError(f"the environment did not end the episode after {self.max_turns} actions")
        return float(self.reward)


def tool_environment(base_url: str, *, tool: str = "run", description: str | None = None,
                     fence: str | None = "python") -> type:
    """A class for TRL's `environment_factory`: its sessions talk to the OpenEnv server at `base_url`, and
    its one tool, named `tool`, sends `code` (in a ```fence block; `fence=None`: as is) as the model's action."""
    text = description or TOOL_DESCRIPTION

    def act(self, code: str) -> str:  # no annotation on self: the tool schema would list it
        return self._act(self._action_text(code))

    act.__name__ = act.__qualname__ = tool
    act.__doc__ = f"{text}\n\nArgs:\n    code: the program or code cell\n\nReturns:\n    The environment's answer."
    return type("ScaleRLToolEnv", (EpisodeToolEnv,), {"base_url": base_url, "fence": fence, tool: act})


def episode_reward(completions: Sequence[Any], environments: Sequence[EpisodeToolEnv], **kwargs: Any) -> list[float]:
    """TRL reward function: each rollout's episode, ended with its final assistant message, scored."""
    return [env._finish(_final_text(c)) for c, env in zip(completions, environments, strict=True)]


def _final_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    said = [m.get("content") or "" for m in completion if m.get("role") == "assistant"]
    return said[-1] if said else ""


def problem_rows(problems: Sequence[ProblemRecord]) -> list[dict[str, Any]]:
    """Dataset rows for TRL: the problem's chat `prompt`, and the record as JSON text in `problem`."""
    return [{"prompt": [m.model_dump() for m in p.prompt], "problem": p.model_dump_json(), "prompt_id": p.prompt_id}
            for p in problems]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m scalerl.env.adapters.openenv",
                                     description="Serve one installed environment as an OpenEnv environment.")
    parser.add_argument("--environment", required=True, help="an installed environment (scalerl.environments)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS, help="open episodes at once")
    parser.add_argument("--limits", default=None, help="EpisodeLimits as JSON (default: the environment's)")
    args = parser.parse_args(argv)
    import uvicorn

    limits = EpisodeLimits.model_validate(json.loads(args.limits)) if args.limits else None
    app = create_app(args.environment, limits=limits, max_sessions=args.max_sessions)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
