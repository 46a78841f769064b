"""The generation-engine interface that the torch engine and the vLLM engine implement.

Contract:
- `submit(request)` queues one prompt for `samples_per_prompt` samples and returns at once.
- `poll(timeout_s)` returns the groups whose samples have all finished (possibly none).
- `update_weights(weights, policy_version)` is applied *in flight*: running sequences keep their
  KV cache and continue with the new weights; every token records the policy version that sampled it.
- Sampling for training is at temperature 1 with no top-p/top-k truncation unless asked, and the
  recorded logprob is that of the distribution actually sampled from.
- Token ids go end to end: nothing is re-tokenized from text.

Not guaranteed: ordering of finished groups (they finish when they finish).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator
from scalerl.env.contracts.records import Strict

FinishReason = Literal["stop", "length", "interrupted", "abort"]


class SamplingParams(Strict):
    temperature: float = Field(default=1.0, gt=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    top_k: int = Field(default=0, ge=0, description="0 disables top-k")
    max_new_tokens: int = Field(default=256, ge=1, description="total sampled-token budget per sample")
    stop_token_ids: list[int] = Field(default_factory=list)
    seed: int | None = Field(default=None, description="sample i draws from its own stream, seeded "
                             "`sample_seed(i)`; None = the engine's stream")

    def sample_seed(self, index: int) -> int | None:
        """The seed of sample `index` of a request (each sample its own stream, the same rule in every engine)."""
        return None if self.seed is None else self.seed + 1000 * index


class InterruptionPlan(Strict):
    """Forced-interruption length control for one request (ScaleRL §length control).

    After `think_budget_tokens` sampled tokens without a stop, `phrase_token_ids` are appended
    (loss-masked: they were not sampled) and up to `answer_budget_tokens` more tokens are sampled.
    A sample that still does not stop is `length` (truncated)."""

    think_budget_tokens: int = Field(ge=1)
    phrase_token_ids: list[int] = Field(min_length=1)
    answer_budget_tokens: int = Field(ge=1)


class GenerationRequest(Strict):
    request_id: str
    prompt_token_ids: list[int] = Field(min_length=1)
    samples_per_prompt: int = Field(default=1, ge=1)
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    interruption: InterruptionPlan | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def output_budget(self) -> int:
        """Most output tokens one sample can have (forced interruption-phrase tokens included)."""
        plan = self.interruption
        if plan is None:
            return self.sampling.max_new_tokens
        return plan.think_budget_tokens + len(plan.phrase_token_ids) + plan.answer_budget_tokens

    def check_fits(self, max_seq_len: int) -> None:
        """ValueError when prompt + output budget exceed an engine's `max_seq_len`."""
        budget = self.output_budget()
        if len(self.prompt_token_ids) + budget > max_seq_len:
            raise ValueError(f"request {self.request_id}: prompt ({len(self.prompt_token_ids)}) + budget "
                             f"({budget}) exceeds the engine's max_seq_len {max_seq_len}")


class GeneratedSample(Strict):
    """One finished sample. The per-token lists all have len(token_ids)."""

    sample_index: int
    token_ids: list[int]
    logprobs: list[float]
    policy_versions: list[int]
    loss_mask: list[int]  # 0 where the token was injected (interruption phrase), 1 where sampled
    finish_reason: FinishReason
    interrupted: bool = False

    @model_validator(mode="after")
    def _aligned(self) -> GeneratedSample:
        n = len(self.token_ids)
        if not (len(self.logprobs) == len(self.policy_versions) == len(self.loss_mask) == n):
            raise ValueError("per-token lists must have the same length as token_ids")
        return self

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


class GeneratedGroup(Strict):
    request: GenerationRequest
    samples: list[GeneratedSample]


@dataclass
class EngineStats:
    """Cumulative counters every engine keeps (the runtime reads them for metrics and compute)."""

    busy_s: float = 0.0  # time spent generating
    idle_s: float = 0.0  # time with nothing to generate
    sampled_tokens: int = 0  # output tokens, forced interruption-phrase tokens included
    weight_updates: int = 0


class GenerationEngine(ABC):
    """What every engine implements; see the module docstring for the contract."""

    _stats: EngineStats

    @property
    def stats(self) -> EngineStats:
        """The engine's cumulative counters (engines may keep more fields in a subclass)."""
        return self._stats

    @abstractmethod
    def submit(self, request: GenerationRequest) -> None: ...

    @abstractmethod
    def poll(self, timeout_s: float = 0.0) -> list[GeneratedGroup]: ...

    @abstractmethod
    def update_weights(self, weights: Mapping[str, Any], policy_version: int) -> None: ...

    @property
    @abstractmethod
    def policy_version(self) -> int: ...

    @abstractmethod
    def num_pending(self) -> int:
        """Requests submitted and not yet returned by `poll`."""

    def close(self) -> None:
        """Release processes and memory; idempotent."""


class ThreadedEngine(GenerationEngine):
    """An engine whose worker thread hands finished groups to `poll` under one condition variable.

    Subclasses call `_init_handoff(name)` in `__init__`, append to `_finished` and set `_error` under
    `_cv`, and count `_pending` up in `submit`. After a worker failure every later call raises."""

    def _init_handoff(self, name: str) -> None:
        self._engine_name = name
        self._cv = threading.Condition()
        self._finished: list[GeneratedGroup] = []
        self._pending = 0
        self._error: BaseException | None = None

    def num_pending(self) -> int:
        with self._cv:
            return self._pending

    def poll(self, timeout_s: float = 0.0) -> list[GeneratedGroup]:
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while not self._finished and not self._error:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cv.wait(left)
            self._raise_if_failed()
            out, self._finished = self._finished, []
            self._pending -= len(out)
            return out

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"{self._engine_name} failed") from self._error
