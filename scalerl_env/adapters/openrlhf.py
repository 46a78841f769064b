"""OpenRLHF adapter: the remote reward model protocol, served at `POST /get_reward`, plus a reward function.

Two ways to use it from OpenRLHF 0.11 (exact command lines in docs/server.md):
- remote: `--reward.remote_url http://127.0.0.1:8000/get_reward`; OpenRLHF posts
  `{"query": [...], "prompts": [...], "labels": [...]}` and reads `rewards` (for the advantage),
  `scores` (0/1, for dynamic filtering) and `extra_logs` (logged per sample).
- local function: `--reward.remote_url /path/to/scalerl_env/adapters/openrlhf.py` makes OpenRLHF call
  `reward_func(queries, prompts, labels)` in its own process; that scores over HTTP when
  `SCALERL_REWARD_URL` is set (one URL or a comma-separated list of replicas), sending
  `SCALERL_REWARD_TOKEN` as the bearer token, else in process. OpenRLHF's own remote client (the first
  way) sends no token, so a server started with `--token-file` needs this way (or a proxy adding it).
(OpenRLHF before 0.11 spelled the flag `--remote_rm_url`.) Labels are normalized as dataset-column
references (see `scalerl.env.adapters`).

`query` is prompt + response: the prompt is stripped when the query starts with it. When it does not
(e.g. the chat template was re-rendered differently), the whole query is scored and
`extra_logs["prompt_not_stripped"]` is 1 for that sample, so the mismatch is visible, not silent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scalerl.env.adapters import reference_item, score_items
from scalerl.env.contracts.records import Status, Verdict, VerifyItem
from scalerl.env.server.models import RewardRequest, RewardResponse


def strip_prompt(query: str, prompt: str | None) -> tuple[str, bool]:
    """(response, stripped?): the response part of `query` when it starts with `prompt`."""
    if prompt and query.startswith(prompt):
        return query[len(prompt):], True
    return query, not prompt


def request_items(req: RewardRequest) -> list[VerifyItem]:
    prompts = req.prompts or [None] * len(req.query)
    items = []
    for i, (query, prompt, label) in enumerate(zip(req.query, prompts, req.labels)):
        response, _ = strip_prompt(query, prompt)
        items.append(reference_item(response, label, id=str(i), loc=("labels", i)))
    return items


def reward_response(verdicts: Sequence[Verdict], prompts_stripped: Sequence[bool] | None = None) -> RewardResponse:
    rewards = [float(v.reward) for v in verdicts]
    scores = [1.0 if v.status is Status.correct else 0.0 for v in verdicts]
    extra_logs = {
        "correct": scores,
        "verifier_error": [1.0 if v.status is Status.error else 0.0 for v in verdicts],
        "timeout": [1.0 if v.status is Status.timeout else 0.0 for v in verdicts],
        "no_answer": [1.0 if v.status is Status.no_answer else 0.0 for v in verdicts],
        "verify_seconds": [float(v.elapsed_s) for v in verdicts],
    }
    if prompts_stripped is not None:
        extra_logs["prompt_not_stripped"] = [0.0 if ok else 1.0 for ok in prompts_stripped]
    return RewardResponse(rewards=rewards, scores=scores, extra_logs=extra_logs)


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any) -> dict:
    """OpenRLHF's custom reward function signature; returns tensors as OpenRLHF expects."""
    req = RewardRequest(query=list(queries), prompts=list(prompts), labels=list(labels))
    result = reward_response(score_items(request_items(req)), prompts_stripped=stripped_flags(req))
    try:
        import torch
    except ImportError:  # OpenRLHF always has torch; plain lists keep the function usable without it
        return result.model_dump()
    return {
        "rewards": torch.tensor(result.rewards), "scores": torch.tensor(result.scores),
        "extra_logs": {k: torch.tensor(v) for k, v in result.extra_logs.items()},
    }


def stripped_flags(req: RewardRequest) -> list[bool]:
    prompts = req.prompts or [None] * len(req.query)
    return [strip_prompt(q, p)[1] for q, p in zip(req.query, prompts)]
