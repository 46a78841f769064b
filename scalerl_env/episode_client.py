"""Python client of the reward server's episodes (`/v1/episodes`): `EpisodeClient` (sync), `AsyncEpisodeClient`.

    with EpisodeClient("http://127.0.0.1:8000", token="...") as client:
        episode = client.episode("code-feedback", problem)     # the contract's Episode, served remotely
        step = episode.reset()
        while not step.done:
            step = episode.step(policy(step.observation))
        episode.close()

Guarantees:
- The transport is `RewardClient`'s (bearer token, TLS verification, backoff with jitter honouring
  `Retry-After`); these clients are reward clients that also run episodes.
- Every episode call is safe to re-send, so refused connections, 503s, timeouts and dropped connections
  are retried: a step carries the turn it answers (the server applies a turn once and answers a re-send
  with the first result), a create carries an `Idempotency-Key` (one per create, the same on each
  re-send), a close of a closed episode answers the same.
- `RemoteEpisode` keeps the turn itself, so `step(action)` is the contract's `Episode.step`.
- What is not retried raises `RewardServerError` with the status and `detail` (404: unknown episode or
  environment; 410: the episode was closed, e.g. idle past the server's `episodes.idle_timeout_s`).

Not guaranteed: episodes live in the server process that created them, so the client takes one URL
(several are refused: a failover would land on a server that does not hold the episode).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scalerl.env.client import AsyncRewardClient, RewardClient
from scalerl.env.contracts.episodes import EpisodeLimits, EpisodeStep
from scalerl.env.contracts.records import ProblemRecord
from scalerl.env.replicas import Attempts
from scalerl.env.server.episode_models import EPISODES_PATH, EpisodeClosed, EpisodeCreated, EpisodeState

Problem = ProblemRecord | Mapping[str, Any]
LimitsOverride = EpisodeLimits | Mapping[str, Any] | None


class _Episodes:
    """What the sync and async clients share: one URL, every episode call safe to re-send, the bodies."""

    urls: list[str]

    def _one_url(self) -> None:
        if len(self.urls) != 1:
            raise ValueError(f"an episode client takes one server URL (episodes live in one process), got "
                             f"{len(self.urls)}")

    def _attempts(self, method: str, path: str, key: str | None) -> tuple[Attempts, dict[str, str]]:
        attempts, headers = super()._attempts(method, path, key)  # type: ignore[misc]
        # Steps name their turn and a close repeats harmlessly; a create is safe only with its key (above).
        attempts.safe = attempts.safe or (path.startswith(EPISODES_PATH + "/"))
        return attempts, headers


def _create_body(environment: str, problem: Problem, limits: LimitsOverride) -> dict[str, Any]:
    body: dict[str, Any] = {"environment": environment, "problem": _plain(problem)}
    if limits is not None:  # only the fields given: they replace the environment's own
        body["limits"] = limits.model_dump(mode="json", exclude_unset=True) if isinstance(limits, EpisodeLimits) \
            else dict(limits)
    return body


def _plain(problem: Problem) -> dict[str, Any]:
    return problem.model_dump(mode="json", exclude_none=True) if isinstance(problem, ProblemRecord) else dict(problem)


class EpisodeClient(_Episodes, RewardClient):
    """Synchronous; safe to share between threads (one episode's steps must still come one after another)."""

    def __init__(self, base_url: str | Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self._one_url()

    def create(self, environment: str, problem: Problem, limits: LimitsOverride = None, *,
               idempotency_key: str | None = None) -> EpisodeCreated:
        response = self._request("POST", EPISODES_PATH, _create_body(environment, problem, limits),
                                 key=self._key(idempotency_key))
        return EpisodeCreated.model_validate_json(response.content)

    def step(self, episode_id: str, action: str, turn: int) -> EpisodeStep:
        response = self._request("POST", f"{EPISODES_PATH}/{episode_id}/step", {"action": action, "turn": turn})
        return EpisodeStep.model_validate_json(response.content)

    def state(self, episode_id: str) -> EpisodeState:
        return EpisodeState.model_validate_json(self._request("GET", f"{EPISODES_PATH}/{episode_id}").content)

    def close_episode(self, episode_id: str) -> EpisodeClosed:
        return EpisodeClosed.model_validate_json(self._request("DELETE", f"{EPISODES_PATH}/{episode_id}").content)

    def episode(self, environment: str, problem: Problem, limits: LimitsOverride = None) -> RemoteEpisode:
        """An `Episode` (the contract's protocol) whose work runs on the server."""
        return RemoteEpisode(self, environment, problem, limits)


class RemoteEpisode:
    """The contract's `Episode` over HTTP: `reset` creates it on the server, `step` sends the next turn,
    `close` deletes it (safe to call twice, and before `reset`)."""

    def __init__(self, client: EpisodeClient, environment: str, problem: Problem, limits: LimitsOverride) -> None:
        self.client, self.environment, self.problem, self.limits = client, environment, problem, limits
        self.id: str | None = None
        self.turn = 0

    def reset(self) -> EpisodeStep:
        if self.id is not None:
            raise RuntimeError(f"episode {self.id} was reset already; open a new one")
        created = self.client.create(self.environment, self.problem, self.limits)
        self.id, self.turn = created.episode_id, created.step.turn
        return created.step

    def step(self, action_text: str) -> EpisodeStep:
        if self.id is None:
            raise RuntimeError("reset() first")
        result = self.client.step(self.id, action_text, self.turn)
        self.turn = result.turn
        return result

    def close(self) -> None:
        if self.id is not None:
            self.client.close_episode(self.id)


class AsyncEpisodeClient(_Episodes, AsyncRewardClient):
    """Asynchronous; the same calls as `EpisodeClient`."""

    def __init__(self, base_url: str | Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self._one_url()

    async def create(self, environment: str, problem: Problem, limits: LimitsOverride = None, *,
                     idempotency_key: str | None = None) -> EpisodeCreated:
        response = await self._request("POST", EPISODES_PATH, _create_body(environment, problem, limits),
                                       key=self._key(idempotency_key))
        return EpisodeCreated.model_validate_json(response.content)

    async def step(self, episode_id: str, action: str, turn: int) -> EpisodeStep:
        response = await self._request("POST", f"{EPISODES_PATH}/{episode_id}/step", {"action": action, "turn": turn})
        return EpisodeStep.model_validate_json(response.content)

    async def state(self, episode_id: str) -> EpisodeState:
        return EpisodeState.model_validate_json((await self._request("GET", f"{EPISODES_PATH}/{episode_id}")).content)

    async def close_episode(self, episode_id: str) -> EpisodeClosed:
        response = await self._request("DELETE", f"{EPISODES_PATH}/{episode_id}")
        return EpisodeClosed.model_validate_json(response.content)
