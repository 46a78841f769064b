"""The generation-side work around the engine: build requests from sampled problems, score results.

`Rollouts.make_request(group_id)` draws the next problem (thread-safe), encodes its prompt, and plans
the interruption (`plan_interruption`, seeded per group) under the length budgets of the curriculum
stage the problem was drawn in (`stage()`, read with the draw; the run's own budgets without stages).
The request carries those budgets to the end: a group in flight across a stage boundary keeps them,
and its length penalty takes L_max from its own request. `Rollouts.score(...)` decodes each
sample's token ids (text only for the verifiers; training keeps the ids) and verifies the whole group
in one `verify_batch` call (identical completions are scored once by the pool).

Problems of a domain the run plays as episodes (`TrainConfig.environments`) get a request that names the
environment, without an interruption plan, whose `max_new_tokens` is the whole episode's budget (the
output budget one sample has under the stage's settings); `scalerl.trainer.rollout.episodes.EpisodeDriver`
plays it, and `score` takes the environments' verdicts as they are (never verifying again).

Guarantees: verdicts come back in sample order; training never re-tokenizes text (decoded text goes
only to the verifiers). Not guaranteed: which problem a group gets when several threads draw at once
(draws are serialized, their order is the threads').

`verify(verifier, problem, completions)` is the named "verify" phase of the pipeline; the in-process
runtime runs it on its scorer thread, overlapping verification with generation and training.
`BatchDrawer` is the `draw` of a training run: one problem at a time from the sampler's batches.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from scalerl.curriculum.sampler import Sampler
from scalerl.curriculum.strategies import stage_index
from scalerl.curriculum.strategy_config import StageConfig
from scalerl.env.contracts.records import ProblemRecord, Verdict
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.core.length_control import length_penalties, output_budget, plan_interruption, stage_length
from scalerl.trainer.engines.base import GeneratedGroup, GenerationRequest, SamplingParams
from scalerl.trainer.rollout.episodes import ENVIRONMENT, EPISODES, PROBLEM
from scalerl.trainer.rollout.messages import RolloutGroup
from scalerl.trainer.rollout.problems import PromptCodec


def verify(verifier: Any, problem: ProblemRecord, completions: Sequence[str]) -> list[Verdict]:
    """Score every completion of one problem with the verifier pool.

    Identical completions of a group are scored once (a sandbox run costs tens of ms; groups of a
    trained policy repeat themselves); the copies carry `details.deduplicated = True`."""
    unique = list(dict.fromkeys(completions))
    items = [problem.verify_item(text, id=f"{problem.prompt_id}/{i}") for i, text in enumerate(unique)]
    by_text = dict(zip(unique, verifier.verify_batch(items)))
    out, seen = [], set()
    for text in completions:
        verdict = by_text[text]
        if text in seen:
            verdict = verdict.model_copy(update={"details": {**verdict.details, "deduplicated": True}})
        seen.add(text)
        out.append(verdict)
    return out


class BatchDrawer:
    """One problem at a time from batches of the sampler (one ledger commit per batch, not per problem),
    and the curriculum stage of the batch the last problem came from (the stage the sampler's policy
    drew it under). Callers serialize calls (`Rollouts` holds its lock around draw and stage)."""

    def __init__(self, sampler: Sampler, batch: int, stages: Sequence[StageConfig]) -> None:
        self.sampler, self.batch, self.stages = sampler, batch, stages
        self._buffer: list[ProblemRecord] = []
        self._stage = 0

    def __call__(self) -> ProblemRecord:
        if not self._buffer:
            self._stage = stage_index(self.sampler.batches, self.stages)
            self._buffer.extend(self.sampler.next_batch(self.batch))
        return self._buffer.pop(0)

    def stage(self) -> int:
        return self._stage

    def state(self) -> dict[str, Any]:
        """The prompts of the current batch not handed out yet, and its stage (checkpointed with the sampler)."""
        return {"prompt_ids": [p.prompt_id for p in self._buffer], "stage": self._stage}

    def load_state(self, state: dict[str, Any] | None) -> None:
        if state:
            self._buffer = [self.sampler.problem(pid) for pid in state["prompt_ids"]]
            self._stage = int(state["stage"])


class Rollouts:
    """Implements `scalerl.trainer.rollout.runtime.RolloutWorker`."""

    def __init__(self, cfg: TrainConfig, codec: PromptCodec, draw: Callable[[], ProblemRecord], verifier: Any,
                 *, seed: int, stage: Callable[[], int] | None = None) -> None:
        self.cfg, self.codec, self.draw, self.verifier = cfg, codec, draw, verifier
        self._stage = stage
        stages = cfg.curriculum.stages
        self._budgets = [stage_length(cfg.length, cfg.engine.max_new_tokens, s) for s in stages or [None]]
        self._problems: dict[int, tuple[ProblemRecord, list[int]]] = {}
        self._lock = threading.Lock()
        self._seed = seed
        self._phrase = codec.encode(cfg.length.interruption_phrase) if cfg.length.mode == "interrupt" else None
        self.environments = cfg.environment_by_domain()  # domain -> the environment that plays its problems

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No problem is drawn (no sampler write to the ledger) inside this block."""
        with self._lock:
            yield

    def sampling(self, max_new_tokens: int | None = None) -> SamplingParams:
        e = self.cfg.engine
        return SamplingParams(temperature=e.temperature, max_new_tokens=max_new_tokens or e.max_new_tokens,
                              stop_token_ids=self.codec.stop_token_ids)

    def make_request(self, group_id: int) -> GenerationRequest:
        with self._lock:
            problem = self.draw()
            stage = self._stage() if self._stage is not None else 0
        length, max_new_tokens = self._budgets[stage]
        prompt_ids = self.codec.encode_problem(problem)
        with self._lock:
            self._problems[group_id] = (problem, prompt_ids)
        metadata: dict[str, Any] = {"prompt_id": problem.prompt_id, "domain": problem.domain}
        env = self.environments.get(problem.domain)
        if env is None:
            plan = plan_interruption(length, random.Random(f"{self._seed}/{group_id}"), phrase_token_ids=self._phrase)
            sampling = self.sampling(max_new_tokens)
        else:  # played by `EpisodeDriver`: no interruption, the whole episode gets one sample's output budget
            plan, sampling = None, self.sampling(output_budget(length, max_new_tokens, len(self._phrase or [])))
            metadata.update({ENVIRONMENT: env, PROBLEM: problem})
        return GenerationRequest(
            request_id=f"g{group_id}", prompt_token_ids=prompt_ids,
            samples_per_prompt=self.cfg.pipeline.samples_per_prompt, sampling=sampling, interruption=plan,
            metadata=metadata,
        )

    def score(self, generated: GeneratedGroup, submitted_version: int, submitted_at: float) -> RolloutGroup:
        group_id = int(generated.request.request_id[1:])
        with self._lock:
            problem, prompt_ids = self._problems.pop(group_id)
        completions = [self.codec.decode(s.token_ids) for s in generated.samples]
        episodes = generated.request.metadata.get(EPISODES)
        if episodes is not None:  # the environments scored their episodes; the prompt is the episodes' own
            verdicts, prompt_ids = [e.verdict for e in episodes], generated.request.prompt_token_ids
        else:
            verdicts = verify(self.verifier, problem, completions)
        penalties = None
        if self.cfg.length.mode == "penalty":
            penalties = length_penalties(generated.samples, [v.correct for v in verdicts], self.cfg.length,
                                         generated.request.sampling.max_new_tokens)
        return RolloutGroup(
            group_id=group_id, problem=problem, prompt_token_ids=prompt_ids, samples=generated.samples,
            completions=completions, verdicts=verdicts, submitted_version=submitted_version,
            submitted_at=submitted_at, finished_at=time.time(), length_penalties=penalties, episodes=episodes,
        )
