"""Forced interruption inside one vLLM request: a vLLM v1 logits processor (ScaleRL length control).

`VLLMEngine` registers `InterruptionProcessor` (`logits_processors=[PROCESSOR_FQCN]`) and passes each
request's plan in `SamplingParams.extra_args[EXTRA_KEY] = {"think_budget": b, "phrase": [ids]}` with
`max_tokens = b + len(phrase) + answer_budget_tokens`. The rule, stateless on the request's live list
of output tokens (n of them so far):

    b <= n < b + len(phrase)  ->  logits := -inf everywhere except phrase[n - b], which gets 0

so once `b` tokens were sampled without a stop, the phrase tokens are emitted one per decode step in
the same request (same KV cache, same weights timeline), then sampling continues normally.

Guarantees:
- The phrase starts exactly at output position `b` (the processor runs before temperature, top-k and
  top-p; a row with one finite logit survives all of them). With `logprobs_mode="processed_logprobs"`
  vLLM reports log softmax of that row, i.e. exactly 0.0 for a forced token (checked by the tests).
- A sampled stop token ends the sample during the thinking phase exactly as without the processor
  (vLLM's stop check runs before the next step). No stop token can be sampled inside the phrase
  (every other logit is -inf); a phrase that *contains* a stop token would end the request on it, so
  the engine rejects such plans at submit.
- Stateless: preemption with recompute, pause/resume for weight updates and batch reordering need no
  bookkeeping beyond the batch-index map that `update_state` keeps.

Not guaranteed: speculative decoding (vLLM rejects custom logits processors with it); async scheduling
(the output-token list then holds placeholders; the engine turns it off).

Importing this module imports vLLM; the main package never imports it (vLLM's engine-core process
loads it by name).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from vllm import SamplingParams
from vllm.config import VllmConfig
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor
from vllm.v1.sample.logits_processor.builtin import process_dict_updates

EXTRA_KEY = "scalerl_interrupt"
PROCESSOR_FQCN = "scalerl.trainer.engines.vllm_interrupt:InterruptionProcessor"


def forced_token(num_output: int, think_budget: int, phrase: Sequence[int]) -> int | None:
    """The token the rule forces after `num_output` output tokens, or None (sample normally)."""
    k = num_output - think_budget
    return phrase[k] if 0 <= k < len(phrase) else None


def _plan(params: SamplingParams | None) -> tuple[int, tuple[int, ...]] | None:
    spec = (params.extra_args or {}).get(EXTRA_KEY) if params is not None else None
    if spec is None:
        return None
    budget, phrase = spec.get("think_budget"), spec.get("phrase")
    if not isinstance(budget, int) or budget < 1:
        raise ValueError(f"extra_args[{EXTRA_KEY!r}].think_budget must be an int >= 1, got {budget!r}")
    if not phrase or not all(isinstance(t, int) and t >= 0 for t in phrase):
        raise ValueError(f"extra_args[{EXTRA_KEY!r}].phrase must be a non-empty list of token ids")
    return budget, tuple(phrase)


class InterruptionProcessor(LogitsProcessor):
    """See the module docstring. State: batch index -> (think budget, phrase, live output-token list)."""

    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool) -> None:
        self.device = device
        self.plans: dict[int, tuple[int, tuple[int, ...], list[int]]] = {}

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        _plan(sampling_params)

    def is_argmax_invariant(self) -> bool:
        return False  # forcing a token changes the argmax

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        def new_state(params: SamplingParams, _prompt: Any, output: list[int]) -> Any:
            plan = _plan(params)
            return None if plan is None else (*plan, output)

        process_dict_updates(self.plans, batch_update, new_state)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        rows, toks = [], []
        for index, (budget, phrase, output) in self.plans.items():
            tok = forced_token(len(output), budget, phrase)
            if tok is not None:
                rows.append(index)
                toks.append(tok)
        if rows:
            r = torch.tensor(rows, dtype=torch.long, device=logits.device)
            t = torch.tensor(toks, dtype=torch.long, device=logits.device)
            logits[r] = float("-inf")
            logits[r, t] = 0.0
        return logits
