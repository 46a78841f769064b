"""Training pools and held-out sets from `scalerl_env.sources.generators`, and prompt encoding.

Pools: per domain, `generate(domain, seed, count, level)` deduplicated by `prompt_id`; a seeded
`holdout_fraction` of the distinct prompts (at most `holdout_max_prompts`) is held out and never
trained on (not in the RL pool, not in the warm start). Level 0 has few distinct prompts (math ~900,
code 90), so held-out code problems are few and each is evaluated several times.

`PromptCodec` turns chat messages into prompt token ids and token ids back into text: the tiny
model's character tokenizer with its own prompt format, or a Hugging Face tokenizer's chat template.
Token ids go end to end; text is decoded only for the verifiers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scalerl_env.records import ProblemRecord
from trainer.tiny.model import CharTokenizer, render_prompt


@dataclass
class DomainPool:
    train: list[ProblemRecord]
    holdout: list[ProblemRecord]


def build_pools(domains: Sequence[str], *, level: int, count: int, seed: int, holdout_fraction: float,
                holdout_max_prompts: int) -> dict[str, DomainPool]:
    """Distinct generated problems per domain, split into train and held-out (deterministic)."""
    from scalerl_env.sources.generators import generate

    pools = {}
    for domain in domains:
        unique: dict[str, ProblemRecord] = {}
        for rec in generate(domain, seed=seed, count=count, level=level):
            unique.setdefault(rec.prompt_id, rec)
        ids = sorted(unique)
        n_hold = min(holdout_max_prompts, max(1, round(holdout_fraction * len(ids))))
        hold = set(random.Random(f"holdout/{domain}/{seed}").sample(ids, n_hold))
        pools[domain] = DomainPool(train=[unique[i] for i in ids if i not in hold],
                                   holdout=[unique[i] for i in ids if i in hold])
        if not pools[domain].train:
            raise ValueError(f"domain {domain}: no training problems left after holding out {n_hold}")
    return pools


class PromptCodec:
    """Messages → prompt ids, ids → text, for the tiny char tokenizer or a Hugging Face tokenizer."""

    def __init__(self, tokenizer: Any, stop_token_ids: Sequence[int] | None = None) -> None:
        self.tokenizer = tokenizer
        self.is_tiny = isinstance(tokenizer, CharTokenizer)
        self.eos_token_id = int(tokenizer.eos_token_id)
        # chat models end a turn with their own token (`trainer.model_loading.stop_token_ids`)
        self.stop_token_ids = list(stop_token_ids or [self.eos_token_id])
        self.problem_encoder: Callable[[ProblemRecord], list[int]] | None = None  # trainer.rollout.prompts

    def encode_problem(self, problem: ProblemRecord) -> list[int]:
        """The problem's prompt ids: through the run's template (`problem_encoder`) when set."""
        if self.problem_encoder is not None:
            return self.problem_encoder(problem)
        return self.encode_prompt(problem.prompt)

    def encode_prompt(self, messages: Sequence[Any]) -> list[int]:
        if self.is_tiny:
            return [self.tokenizer.bos_token_id] + self.tokenizer.encode(render_prompt(messages))
        msgs = [m.model_dump() if hasattr(m, "model_dump") else dict(m) for m in messages]
        if getattr(self.tokenizer, "chat_template", None):
            ids = self.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
            return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
        return list(self.tokenizer.encode(render_prompt(msgs)))

    def encode(self, text: str) -> list[int]:
        if self.is_tiny:
            return self.tokenizer.encode(text)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)
