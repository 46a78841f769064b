"""The pool of one domain (training and held-out problems), and prompt encoding.

Pools are built by `scalerl.trainer.run.data_sources.build_data` (files or the procedural generator, split with the
data layer's splitter).

`PromptCodec` turns chat messages into prompt token ids and token ids back into text: the tiny
model's character tokenizer with its own prompt format, or a Hugging Face tokenizer's chat template;
`encode_continuation` encodes what an environment adds to an episode after a model turn. Token ids go
end to end; text is decoded only for the verifiers and environments.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scalerl.env.contracts.records import ProblemRecord
from scalerl.trainer.tiny.model import CharTokenizer, render_prompt


@dataclass
class DomainPool:
    train: list[ProblemRecord]
    holdout: list[ProblemRecord]
    # which `data.sources` entry each problem came from (`scalerl.trainer.run.data_sources.source_labels`), and
    # each source's mixing weight: the sampler mixes a domain's sources by these weights
    source_of: dict[str, str] = field(default_factory=dict)
    source_weights: dict[str, float] = field(default_factory=dict)


class PromptCodec:
    """Messages → prompt ids, ids → text, for the tiny char tokenizer or a Hugging Face tokenizer."""

    def __init__(self, tokenizer: Any, stop_token_ids: Sequence[int] | None = None) -> None:
        self.tokenizer = tokenizer
        self.is_tiny = isinstance(tokenizer, CharTokenizer)
        self.eos_token_id = int(tokenizer.eos_token_id)
        # chat models end a turn with their own token (`scalerl.trainer.engines.model_loading.stop_token_ids`)
        self.stop_token_ids = list(stop_token_ids or [self.eos_token_id])
        self.problem_encoder: Callable[[ProblemRecord], list[int]] | None = None  # scalerl.trainer.rollout.prompts

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

    def encode_continuation(self, messages: Sequence[Any]) -> list[int]:
        """Ids of messages that follow a model turn in an episode, up to the next generation prompt: the chat
        template's rendering of them after an assistant turn, without the conversation's start (no bos, no
        default system message). The model's own turn is never rendered here: its sampled ids stay as they
        are, ending with the stop token it sampled; what the template writes after that token to close the
        turn (ChatML's newline after `<|im_end|>`) comes first."""
        if self.is_tiny:
            return self.tokenizer.encode(render_prompt(messages))
        msgs = [m.model_dump() if hasattr(m, "model_dump") else dict(m) for m in messages]
        if not getattr(self.tokenizer, "chat_template", None):
            return self.encode(render_prompt(msgs))
        base = [{"role": "user", "content": "@@user@@"}, {"role": "assistant", "content": "@@turn@@"}]
        before = self.tokenizer.apply_chat_template(base, tokenize=False)
        full = self.tokenizer.apply_chat_template(base + msgs, tokenize=False, add_generation_prompt=True)
        if not full.startswith(before):
            raise ValueError("the chat template renders a conversation's start differently once more messages "
                             "follow; observations cannot be appended to an episode")
        closing = before[before.rindex("@@turn@@") + len("@@turn@@"):] if "@@turn@@" in before else ""
        for stop in self.stop_token_ids:  # the model sampled the stop token; the rest of the closing is the template's
            text = self.tokenizer.decode([stop], skip_special_tokens=False)
            if text and closing.startswith(text):
                closing = closing[len(text):]
                break
        return self.encode(closing + full[len(before):])

    def encode(self, text: str) -> list[int]:
        if self.is_tiny:
            return self.tokenizer.encode(text)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)
