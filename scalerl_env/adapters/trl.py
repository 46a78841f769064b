"""TRL adapter: a reward function for `GRPOTrainer(reward_funcs=[...])`.

    from scalerl.env.adapters.trl import ScaleRLReward
    trainer = GRPOTrainer(model=..., reward_funcs=[ScaleRLReward("http://127.0.0.1:8000")], ...)

TRL calls `reward(prompts=..., completions=..., **columns)` with every other dataset column as a
keyword list (plus `completion_ids`, `trainer_state`); the reference is read from the column named
`reference_key` (default `answer`; a math answer or a code test spec, see `scalerl.env.adapters`).
Completions may be plain text or conversational (a list of messages; their contents are joined).
A `prompt_id` column (text or integers), when present, is passed on so an attached ledger records the
verdicts. The URL may list several replicas (`"http://a:8000,http://b:8000"`); the bearer token is
`token=` or `SCALERL_REWARD_TOKEN`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scalerl.env.adapters import id_text, reference_item, score_items


class ScaleRLReward:
    """`(prompts, completions, **kwargs) -> list[float]`; `__name__` names the reward in TRL's logs."""

    def __init__(self, url: str | None = None, *, reference_key: str = "answer", name: str = "scalerl_reward",
                 token: str | None = None):
        self.url = url  # one URL or a comma-separated list; None: $SCALERL_REWARD_URL, else in process
        self.token = token  # None: $SCALERL_REWARD_TOKEN
        self.reference_key = reference_key
        self.__name__ = name

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        if self.reference_key not in kwargs:
            raise KeyError(f"reward needs the dataset column {self.reference_key!r}; "
                           f"columns passed: {sorted(kwargs)}")
        references = kwargs[self.reference_key]
        prompt_ids = kwargs.get("prompt_id")
        prompt_ids = [None] * len(completions) if prompt_ids is None else list(prompt_ids)
        if not len(references) == len(prompt_ids) == len(completions):
            raise ValueError(f"{len(completions)} completions but {len(references)} references "
                             f"and {len(prompt_ids)} prompt ids")
        items = [
            reference_item(completion_text(c), ref, id=str(i), prompt_id=id_text(pid, ("prompt_id", i)),
                           loc=(self.reference_key, i))
            for i, (c, ref, pid) in enumerate(zip(completions, references, prompt_ids))
        ]
        return [float(v.reward) for v in score_items(items, url=self.url, token=self.token)]


def completion_text(completion: Any) -> str:
    """Plain text as is; a conversational completion (list of {"role", "content"}) as its joined contents."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "\n".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in completion)
    raise TypeError(f"completion must be text or a list of messages, got {type(completion).__name__}")


def reward_func(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """A ready-made function (reference column `answer`, server from `SCALERL_REWARD_URL` or in process)."""
    return ScaleRLReward()(prompts, completions, **kwargs)
