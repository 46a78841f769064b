"""Typed messages between the pipeline's components.

Components: a *feeder* draws problems and submits generation requests (admission control), the
*engine* generates, a *scorer* decodes and verifies finished groups, the *trainer* takes scored
groups (the lag rule, `scalerl.trainer.rollout.lag_rules`) and pushes weights. One runtime implements
`scalerl.trainer.rollout.runtime.Runtime`: in-process threads and queues (`LocalRuntime`), whose engine and
verifier may be Ray actors (`scalerl.trainer.distributed`). Everything that crosses a component boundary is a
pydantic message below (weights are the exception: a tensor mapping passed by reference in process,
serialized over Ray).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from scalerl.env.contracts.records import ProblemRecord, Strict, Verdict
from scalerl.trainer.engines.base import GeneratedSample

EpisodeEnd = Literal["environment", "length_budget", "abort", "error"]
"""Who ended an episode: the environment (its verdict), the trainer's length budget or sequence length
(`length_budget`), the engine (`abort`), or the environment's own failure in `step` (`error`)."""


class EpisodeOutcome(Strict):
    """How one multi-turn episode ended (`scalerl.trainer.rollout.episodes`): the verdict the sample trains
    on, and the counts the metrics read."""

    environment: str
    verdict: Verdict
    ended_by: EpisodeEnd
    turns: int = Field(ge=0, description="model actions")
    sampled_tokens: int = Field(ge=0, description="tokens the model sampled, all turns together")
    env_tokens: int = Field(ge=0, description="observation tokens after the first observation (loss mask 0)")
    counters: dict[str, float] = Field(default_factory=dict, description="the numeric `EpisodeStep.info` of the "
                                       "episode's last step (tool calls, tool errors, feedback turns)")
    last_action: str = Field(default="", description="the episode's last action: the text its verdict scored "
                             "(the ledger's completion, as for an episode served over HTTP)")


class RolloutGroup(Strict):
    """One prompt's finished, scored samples (scorer → trainer)."""

    group_id: int
    problem: ProblemRecord
    prompt_token_ids: list[int]
    samples: list[GeneratedSample]
    completions: list[str]
    verdicts: list[Verdict]
    submitted_version: int
    submitted_at: float
    finished_at: float
    length_penalties: list[float] | None = Field(
        default=None, description="per-sample reward shaping of length.mode=penalty (added to the verdict reward)")
    episodes: list[EpisodeOutcome] | None = Field(
        default=None, description="multi-turn groups: how each sample's episode ended (its verdict is `verdicts`)")

    @property
    def domain(self) -> str:
        return self.problem.domain

    def scored_texts(self) -> list[str]:
        """The text each verdict scored: the completion, or an episode's last action (its completion is the
        whole episode, observations included)."""
        if self.episodes is None:
            return list(self.completions)
        return [e.last_action for e in self.episodes]

    def sequence_lengths(self) -> list[tuple[int, int]]:
        """(context tokens, generated tokens) of each sample: an episode's observations count with its prompt,
        since the model did not generate them (the compute clock's `tokens` are sampled tokens)."""
        prompt = len(self.prompt_token_ids)
        if self.episodes is None:
            return [(prompt, len(s.token_ids)) for s in self.samples]
        return [(prompt + len(s.token_ids) - e.sampled_tokens, e.sampled_tokens)
                for s, e in zip(self.samples, self.episodes)]

    @property
    def rewards(self) -> list[float]:
        """The rewards the step trains on: the verdict's reward plus the length penalty, if any."""
        penalties = self.length_penalties or [0.0] * len(self.verdicts)
        return [v.reward + p for v, p in zip(self.verdicts, penalties)]


class WeightsPushed(Strict):
    """Acknowledgement of a weight push (trainer → generators → trainer)."""

    policy_version: int
    elapsed_s: float


class GeneratorStats(Strict):
    """Cumulative generator-side counters (for the metrics and the benchmark)."""

    submitted_groups: int = 0
    finished_groups: int = 0
    taken_groups: int = 0
    sampled_tokens: int = 0
    busy_s: float = Field(default=0.0, description="engine time spent in forward passes")
    idle_s: float = Field(default=0.0, description="engine time with nothing to decode")
    wall_s: float = 0.0

    @property
    def idle_fraction(self) -> float:
        total = self.busy_s + self.idle_s
        return self.idle_s / total if total > 0 else 0.0

