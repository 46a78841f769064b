"""Multi-turn episodes on the generation side: `EpisodeDriver` plays a group's episodes through the engine.

`EpisodeDriver` wraps the run's generation engine and is one itself. A request whose metadata names an
environment (`Rollouts.make_request` does so for the domains a run plays as episodes) opens one episode
per sample (`EnvironmentSpec.open`) and plays it turn by turn: each turn is one engine request whose
prompt is the episode so far as token ids (the model's sampled ids are never re-tokenized; the
environment's observation is encoded with the chat template, `PromptCodec.encode_continuation`), and the
decoded action goes to `Episode.step`. When every episode of the group has ended, `poll` returns ONE
`GeneratedSample` per episode (after the prompt: every turn's sampled tokens with their own logprobs,
policy versions and loss mask, and the observations between them with loss mask 0) and the episodes'
outcomes under `metadata[EPISODES]`: the environment's verdicts, which the scorer uses as they are.
Requests without an environment pass through untouched (validation, single-turn domains).

Guarantees:
- A group is the episodes of one problem; the group's prompt is the longest common prefix of its
  episodes' first observations (any rest is part of the sample, loss-masked).
- Every sampled token keeps the policy version that sampled it, across turns and weight pushes; an
  observation token carries the version of the action before it, so the oldest token of an episode is
  a sampled one, no older than the version at which the runtime submitted the group (the lag rule).
- The length budget counts the whole episode: a turn may sample what the group's
  `sampling.max_new_tokens` leaves after the earlier turns' sampled AND observation tokens, and never
  more than the engine's `max_seq_len` leaves after the episode so far. The action a turn ends with is
  always stepped, so the environment scores it when it ends the episode there; when there is no room
  for another turn the episode is cut: `finish_reason` "length" (truncated, so
  `length.mask_truncated` drops it from the loss) and the verdict `no_answer` (`details.episode_end`).
- Each verdict's `details` carry `turns`, `tool_calls` and `environment` (the ledger's attempt columns
  `turns` and `tool_calls` are filled from them, as for an episode served over HTTP).
- `close` closes every episode still open, then the engine.
- The steps of the episodes whose turns one `poll` returns run at once, at most `step_threads` together
  (an episode's own steps one after another); the poll waits for them.
Not guaranteed: that an episode whose environment raises in `step` is scored (it ends with an `error`
verdict, which the ledger does not count as scored).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from scalerl.env.contracts.episodes import Episode, EpisodeLimits, EpisodeStep, environment
from scalerl.env.contracts.records import DEFAULT_REWARDS, ProblemRecord, Verdict
from scalerl.trainer.engines.base import (
    EngineStats,
    FinishReason,
    GeneratedGroup,
    GeneratedSample,
    GenerationEngine,
    GenerationRequest,
)
from scalerl.trainer.rollout.messages import EpisodeEnd, EpisodeOutcome, RolloutGroup
from scalerl.trainer.rollout.problems import PromptCodec

EPISODES = "episodes"
"""Metadata key of a finished episode group: its `EpisodeOutcome`s, in sample order."""
ENVIRONMENT = "environment"
"""Metadata key of a request to play as episodes: the environment's name (with the problem under `PROBLEM`)."""
PROBLEM = "problem"
EPISODE_COUNTERS = ("tool_calls", "tool_errors", "feedback_turns")
"""The `EpisodeStep.info` counters the metrics average per episode (0 where an environment has none)."""


@dataclass
class _Play:
    """One episode in progress: what it has generated after the group's prompt."""

    episode: Episode
    index: int
    context: list[int]  # the whole episode so far, prompt included: the next turn's prompt
    head: list[int] = field(default_factory=list)  # its first observation past the group's common prompt
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    turns: int = 0
    env_tokens: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    last_action: str = ""
    finish: FinishReason = "stop"
    outcome: EpisodeOutcome | None = None


@dataclass
class _Group:
    request: GenerationRequest
    environment: str
    plays: list[_Play] = field(default_factory=list)
    prompt: list[int] = field(default_factory=list)


def _step(episode: Episode, action: str | None) -> EpisodeStep | Exception | None:
    """`episode.step(action)`, or the exception it raised; None when there is no action (an aborted turn)."""
    if action is None:
        return None
    try:
        return episode.step(action)
    except Exception as exc:
        return exc


def opening_ids(problem: ProblemRecord, name: str, codec: PromptCodec, verifier_config: Any = None,
                limits: EpisodeLimits | None = None) -> list[int]:
    """The token ids of an episode's first observation (what its first turn is prompted with): one episode
    opened, reset and closed."""
    spec = environment(name)
    episode = spec.open(problem, limits or spec.limits, verifier_config)
    try:
        first = episode.reset()
    finally:
        episode.close()
    return codec.encode_prompt(first.observation)


def common_prefix(sequences: Sequence[Sequence[int]]) -> list[int]:
    """The longest prefix every sequence starts with."""
    first = list(sequences[0])
    n = len(first)
    for seq in sequences[1:]:
        n = next((i for i, (a, b) in enumerate(zip(first[:n], seq)) if a != b), min(n, len(seq)))
    return first[:n]


class EpisodeDriver(GenerationEngine):
    """The run's engine, with requests that name an environment played as episodes (module docstring)."""

    def __init__(self, engine: GenerationEngine, codec: PromptCodec, *, max_seq_len: int,
                 verifier_config: Any = None, limits: EpisodeLimits | None = None, step_threads: int = 1) -> None:
        self.engine, self.codec, self.max_seq_len = engine, codec, max_seq_len
        self._steps = ThreadPoolExecutor(max_workers=step_threads, thread_name_prefix="episode-step")
        self.verifier_config = verifier_config
        self.limits = limits  # every episode's (`TrainConfig.episode_limits`); None = each environment's own
        self._rewards = getattr(verifier_config, "rewards", DEFAULT_REWARDS)
        self._lock = threading.Lock()
        self._groups: dict[str, _Group] = {}
        self._turns: dict[str, tuple[_Group, _Play]] = {}  # turn request id -> its episode
        self._pending = 0

    # ----------------------------------------------------------------------------- engine interface
    @property
    def stats(self) -> EngineStats:
        return self.engine.stats

    @property
    def policy_version(self) -> int:
        return self.engine.policy_version

    def update_weights(self, weights: Mapping[str, Any], policy_version: int) -> None:
        self.engine.update_weights(weights, policy_version)

    def num_pending(self) -> int:
        with self._lock:
            return self._pending

    def submit(self, request: GenerationRequest) -> None:
        with self._lock:
            self._pending += 1
        name = request.metadata.get(ENVIRONMENT)
        if name is None:
            self.engine.submit(request)
            return
        group = self._open(request, name)
        for play in group.plays:
            self._next_turn(group, play)

    def poll(self, timeout_s: float = 0.0) -> list[GeneratedGroup]:
        out, turns = [], []
        for generated in self.engine.poll(timeout_s):
            with self._lock:
                turn = self._turns.pop(generated.request.request_id, None)
            if turn is None:
                out.append(generated)
            else:
                turns.append((*turn, generated.samples[0]))
        actions = [self._record(play, sample) for _, play, sample in turns]
        # the environments' steps run sandboxed programs: at most `step_threads` at once, one per episode
        steps = list(self._steps.map(_step, [play.episode for _, play, _ in turns], actions))
        for (group, play, sample), step in zip(turns, steps):
            self._advance(group, play, sample, step)
            if all(p.outcome is not None for p in group.plays):
                out.append(self._finish(group))
        with self._lock:
            self._pending -= len(out)
        return out

    def close(self) -> None:
        with self._lock:
            groups, self._groups, self._turns = list(self._groups.values()), {}, {}
        for group in groups:
            for play in group.plays:
                play.episode.close()
        self._steps.shutdown(wait=False, cancel_futures=True)
        self.engine.close()

    # ----------------------------------------------------------------------------- episodes
    def _open(self, request: GenerationRequest, name: str) -> _Group:
        """One episode per sample, reset; the group's prompt is their first observations' common prefix. A
        failure closes the episodes opened so far before it propagates."""
        spec = environment(name)
        problem = request.metadata[PROBLEM]
        group, opened = _Group(request=request, environment=name), []
        try:
            for i in range(request.samples_per_prompt):
                opened.append(episode := spec.open(problem, self.limits or spec.limits, self.verifier_config))
                first = episode.reset()
                if first.done:
                    raise ValueError(f"environment {name!r} ended an episode of {problem.prompt_id} at reset")
                context = self.codec.encode_prompt(first.observation)
                if len(context) >= self.max_seq_len:
                    raise ValueError(f"environment {name!r}: the first observation of {problem.prompt_id} has "
                                     f"{len(context)} tokens, no room in engine.max_seq_len={self.max_seq_len}")
                group.plays.append(_Play(episode=episode, index=i, context=context, info=dict(first.info)))
        except BaseException:
            for episode in opened:
                episode.close()
            raise
        group.prompt = common_prefix([p.context for p in group.plays])
        for play in group.plays:
            play.head = play.context[len(group.prompt):]
        with self._lock:
            self._groups[request.request_id] = group
        return group

    def _room(self, group: _Group, play: _Play) -> int:
        """Tokens the next turn may sample: what the episode budget and the sequence length leave."""
        used = len(play.token_ids)  # sampled and observation tokens after the first observation
        return min(group.request.sampling.max_new_tokens - used, self.max_seq_len - len(play.context))

    def _next_turn(self, group: _Group, play: _Play) -> None:
        sampling = group.request.sampling
        seed = sampling.sample_seed(play.index)
        turn = GenerationRequest(
            request_id=f"{group.request.request_id}/e{play.index}/t{play.turns}", prompt_token_ids=play.context,
            sampling=sampling.model_copy(update={"max_new_tokens": self._room(group, play),
                                                 "seed": None if seed is None else seed + play.turns}),
            metadata={**{k: v for k, v in group.request.metadata.items() if k != PROBLEM}, "turn": play.turns})
        with self._lock:
            self._turns[turn.request_id] = (group, play)
        self.engine.submit(turn)

    def _record(self, play: _Play, sample: GeneratedSample) -> str | None:
        """Append the turn's sampled tokens; the action text to step the episode with (None: the engine aborted)."""
        play.token_ids += sample.token_ids
        play.logprobs += sample.logprobs
        play.versions += sample.policy_versions
        play.mask += sample.loss_mask
        play.context += sample.token_ids
        play.turns += 1
        play.finish = "length" if sample.truncated else "stop"
        if sample.finish_reason == "abort":
            return None
        play.last_action = self.codec.decode(sample.token_ids)
        return play.last_action

    def _advance(self, group: _Group, play: _Play, sample: GeneratedSample,
                 step: EpisodeStep | BaseException | None) -> None:
        """End the episode (abort, the environment's failure or its end), or observe and start the next turn."""
        if step is None:
            play.finish = "abort"
            return self._end(group, play, Verdict.of("error", details={"episode_end": "abort"}), "abort")
        if isinstance(step, BaseException):  # a plug-in's failure ends its episode, never the run
            return self._end(group, play, Verdict.of("error", details={"episode_end": "error", "error": repr(step)}),
                             "error")
        play.info = dict(step.info)
        if step.done:
            return self._end(group, play, step.verdict or Verdict.of("error", details={"episode_end": "no verdict"}),
                             "environment")
        self._observe(group, play, step, sample)

    def _observe(self, group: _Group, play: _Play, step: EpisodeStep, sample: GeneratedSample) -> None:
        """Append the observation (loss mask 0) and start the next turn, or cut the episode when no room is left."""
        observed = self.codec.encode_continuation(step.observation)
        version = sample.policy_versions[-1] if sample.policy_versions else (play.versions or [0])[-1]
        if self._room(group, play) - len(observed) < 1:
            play.finish = "length"
            details = {"episode_end": "length_budget", "turns": play.turns}
            return self._end(group, play, Verdict.of("no_answer", details=details, rewards=self._rewards),
                             "length_budget")
        play.token_ids += observed
        play.logprobs += [0.0] * len(observed)
        play.versions += [version] * len(observed)
        play.mask += [0] * len(observed)
        play.context += observed
        play.env_tokens += len(observed)
        self._next_turn(group, play)

    def _end(self, group: _Group, play: _Play, verdict: Verdict, ended_by: EpisodeEnd) -> None:
        play.episode.close()
        counters = {k: float(v) for k, v in play.info.items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)}
        # the ledger's `turns` and `tool_calls` columns come from these details, as for a served episode
        verdict = verdict.model_copy(update={"details": {
            **verdict.details, "turns": play.turns, "tool_calls": int(counters.get("tool_calls", 0)),
            "environment": group.environment}})
        play.outcome = EpisodeOutcome(
            environment=group.environment, verdict=verdict, ended_by=ended_by, turns=play.turns,
            sampled_tokens=len(play.token_ids) - play.env_tokens, env_tokens=play.env_tokens, counters=counters,
            last_action=play.last_action)

    def _finish(self, group: _Group) -> GeneratedGroup:
        with self._lock:
            self._groups.pop(group.request.request_id, None)
        samples = [GeneratedSample(
            sample_index=p.index, token_ids=p.head + p.token_ids, logprobs=[0.0] * len(p.head) + p.logprobs,
            policy_versions=[(p.versions or [0])[0]] * len(p.head) + p.versions, loss_mask=[0] * len(p.head) + p.mask,
            finish_reason=p.finish) for p in group.plays]
        metadata = {**{k: v for k, v in group.request.metadata.items() if k != PROBLEM},
                    EPISODES: [p.outcome for p in group.plays]}
        request = group.request.model_copy(update={"prompt_token_ids": group.prompt, "metadata": metadata})
        return GeneratedGroup(request=request, samples=samples)


def episode_metrics(groups: Sequence[RolloutGroup]) -> dict[str, float]:
    """Per environment, over the episodes of a step: `episode/<env>/count`, `turns_mean`, `turns_max`,
    `<counter>_mean` for each of `EPISODE_COUNTERS`, `env_tokens_mean`, `sampled_tokens_mean` and
    `cut_rate` (episodes the trainer ended: no room left in the length budget or sequence)."""
    by_env: dict[str, list[EpisodeOutcome]] = defaultdict(list)
    for g in groups:
        for outcome in g.episodes or []:
            by_env[outcome.environment].append(outcome)
    out: dict[str, float] = {}
    for env, outcomes in sorted(by_env.items()):

        def mean(values: Sequence[float], n: int = len(outcomes)) -> float:
            return float(sum(values)) / n

        key = f"episode/{env}"
        out[f"{key}/count"] = float(len(outcomes))
        out[f"{key}/turns_mean"] = mean([o.turns for o in outcomes])
        out[f"{key}/turns_max"] = float(max(o.turns for o in outcomes))
        for counter in EPISODE_COUNTERS:
            out[f"{key}/{counter}_mean"] = mean([o.counters.get(counter, 0.0) for o in outcomes])
        out[f"{key}/env_tokens_mean"] = mean([o.env_tokens for o in outcomes])
        out[f"{key}/sampled_tokens_mean"] = mean([o.sampled_tokens for o in outcomes])
        out[f"{key}/cut_rate"] = mean([o.ended_by == "length_budget" for o in outcomes])
    return out
