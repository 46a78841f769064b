"""veRL adapter: a custom reward function veRL imports by path.

    custom_reward_function.path=$(python -c "import scalerl_env.adapters.verl as m; print(m.__file__)")
    custom_reward_function.name=compute_score            # NaiveRewardManager, one sample per call
    # or, with reward_model.reward_manager=batch:
    custom_reward_function.name=compute_score_batch      # BatchRewardManager, the whole batch per call

Scores over HTTP when `SCALERL_REWARD_URL` is set (e.g. `http://127.0.0.1:8000`), else in process.
`ground_truth` is the row's `reward_model.ground_truth`: a math answer or a code test spec (see
`scalerl_env.adapters`). A `prompt_id` in `extra_info` is passed on, so an attached ledger records it.

Returns `{"score": reward, "acc": 1.0 | 0.0}`: veRL uses `score` as the reward and logs the other keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scalerl_env.adapters import id_text, reference_item, score_items
from scalerl_env.records import Status, Verdict


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                  **kwargs: Any) -> dict[str, float]:
    """veRL's `compute_score(data_source, solution_str, ground_truth, extra_info=None)`."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **kwargs)[0]


def compute_score_batch(data_sources: Sequence[str], solution_strs: Sequence[str], ground_truths: Sequence[Any],
                        extra_infos: Sequence[dict | None] | None = None, *, url: str | None = None,
                        **kwargs: Any) -> list[dict[str, float]]:
    """veRL's batch form (`reward_model.reward_manager=batch`): one request for the whole batch."""
    extra_infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    if not len(solution_strs) == len(ground_truths) == len(extra_infos):
        raise ValueError(f"{len(solution_strs)} solutions, {len(ground_truths)} ground truths, "
                         f"{len(extra_infos)} extra_infos")
    items = [
        reference_item(solution, truth, id=str(i), loc=("reward_model", "ground_truth", i),
                       prompt_id=id_text((info or {}).get("prompt_id"), ("extra_info", "prompt_id", i)))
        for i, (solution, truth, info) in enumerate(zip(solution_strs, ground_truths, extra_infos))
    ]
    return [_result(v) for v in score_items(items, url=url)]


def _result(verdict: Verdict) -> dict[str, float]:
    return {"score": float(verdict.reward), "acc": 1.0 if verdict.status is Status.correct else 0.0}
