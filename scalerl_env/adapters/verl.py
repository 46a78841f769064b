"""veRL adapter: a custom reward function veRL imports by path (exact settings in docs/server.md).

veRL 0.9 (its reward loop; the keys live under `reward.`):

    reward.custom_reward_function.path=$(python -c "import scalerl.env.adapters.verl as m; print(m.__file__)")
    reward.custom_reward_function.name=compute_score

The reward-loop workers call `compute_score` once per sample; veRL 0.9 has no batched reward-function
path. `compute_score_batch` is the batch form for veRL versions whose `batch` reward manager calls one
function with the whole batch.

Scores over HTTP when `SCALERL_REWARD_URL` is set (e.g. `http://127.0.0.1:8000`, or several replicas
separated by commas) in the reward workers' environment, else in process; `SCALERL_REWARD_TOKEN` there
is the bearer token. `ground_truth` is the row's `reward_model.ground_truth`: a math answer or a
code test spec, as text or as an object (see `scalerl.env.adapters`). A `prompt_id` in `extra_info`
(text or an integer) is passed on, so an attached ledger records it.

Returns `{"score": reward, "acc": 1.0 | 0.0}`: veRL uses `score` as the reward and logs the other keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scalerl.env.adapters import id_text, reference_item, score_items
from scalerl.env.contracts.records import Status, Verdict, VerifyItem

GROUND_TRUTH = ("reward_model", "ground_truth")


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                  *, url: str | None = None, token: str | None = None, **kwargs: Any) -> dict[str, float]:
    """veRL's `compute_score(data_source, solution_str, ground_truth, extra_info=None)`; other keywords
    veRL passes (e.g. `reward_router_address`) are ignored."""
    return _result(score_items([_item(solution_str, ground_truth, extra_info)], url=url, token=token)[0])


def compute_score_batch(data_sources: Sequence[str], solution_strs: Sequence[str], ground_truths: Sequence[Any],
                        extra_infos: Sequence[dict | None] | None = None, *, url: str | None = None,
                        token: str | None = None, **kwargs: Any) -> list[dict[str, float]]:
    """The batch form (`batch` reward manager of veRL versions that have one): one request per batch."""
    extra_infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    if not len(solution_strs) == len(ground_truths) == len(extra_infos):
        raise ValueError(f"{len(solution_strs)} solutions, {len(ground_truths)} ground truths, "
                         f"{len(extra_infos)} extra_infos")
    items = [_item(solution, truth, info, i)
             for i, (solution, truth, info) in enumerate(zip(solution_strs, ground_truths, extra_infos))]
    return [_result(v) for v in score_items(items, url=url, token=token)]


def _item(solution: str, truth: Any, info: dict | None, index: int | None = None) -> VerifyItem:
    """Errors name the row field (`reward_model.ground_truth`), with the batch index in the batch form."""
    at = () if index is None else (index,)
    prompt_id = id_text((info or {}).get("prompt_id"), ("extra_info", "prompt_id", *at))
    return reference_item(solution, truth, id=str(index or 0), prompt_id=prompt_id, loc=(*GROUND_TRUTH, *at))


def _result(verdict: Verdict) -> dict[str, float]:
    return {"score": float(verdict.reward), "acc": 1.0 if verdict.status is Status.correct else 0.0}
