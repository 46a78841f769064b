"""TRL drop-in: a `GRPOTrainer` whose prompts come from the scalerl curriculum, with DAPO dynamic sampling.

    from scalerl.env.adapters.curriculum_source import LocalCurriculum
    from scalerl.env.adapters.trl_curriculum import CurriculumGRPOTrainer, problems_from_dataset
    source = LocalCurriculum(problems_from_dataset(dataset), ledger="runs/trl/ledger.duckdb", strategies=...)
    trainer = CurriculumGRPOTrainer(model=..., reward_funcs=[...], args=GRPOConfig(...), train_dataset=dataset,
                                    curriculum=source, zero_variance=ZeroVarianceConfig(mode="refill"))

The seam is `_generate_and_score_completions`, called once per generation batch: the batch's prompts
are drawn from the curriculum *there* (the dataloader's rows only clock the steps), so a draw always
sees every group reported before it (a prefetching dataloader would draw a batch early). The dataset
is the problem table: every row needs a `prompt_id` (text or integer), unique.

Guarantees
- Every generated group is reported (`report`, step = TRL's global step + 1) before the next draw; a
  prompt retired in the ledger is never generated for again (re-admission strategies aside).
- `zero_variance.mode` (the `curriculum.zero_variance` setting of `scalerl train`):
  `keep` trains on TRL's batch as is; `shrink` masks the completion tokens of groups whose rewards
  are all equal, so they never reach the loss (the batch keeps its shape); `refill` (DAPO dynamic
  sampling) keeps the informative groups and generates further full generation batches, at most
  `max_refill_rounds` of them, until the batch is full of informative groups (the extra ones are
  dropped). If the cap is hit first, the batch is completed with zero-variance groups masked as in
  `shrink`. Metrics (`dynamic_sampling/*`, `curriculum/*`) go through TRL's metrics and logs.
- Several processes: the main process draws and reports, the ids are broadcast, each process takes
  its slice as TRL's `RepeatSampler` would.
Not guaranteed: `refill` in more than one process (refused: the kept groups would have to move
between processes), multimodal rows, `duplicate` mode (refused). Evaluation runs TRL's own path.
The multi-process path is untested here (CPU, one process).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from scalerl.curriculum.filters import has_variance
from scalerl.curriculum.strategy_config import ZeroVarianceConfig
from scalerl.env.adapters import id_text
from scalerl.env.adapters.curriculum_source import CurriculumSource, GroupOutcome, problem_record
from scalerl.env.contracts.records import ProblemRecord
from trl import GRPOTrainer

# Output keys this drop-in knows how to select and concatenate (text models); anything else refuses refill.
LEFT_PADDED = {"prompt_ids": "pad", "prompt_mask": 0}
RIGHT_PADDED = {"completion_ids": "pad", "completion_mask": 0, "old_per_token_logps": 0.0,
                "ref_per_token_logps": 0.0, "sampling_per_token_logps": 0.0, "tool_mask": 1}
PER_ROW = ("advantages",)


def problems_from_dataset(dataset: Any, *, reference_key: str = "answer", prompt_id_key: str = "prompt_id",
                          domain_key: str = "domain", source: str = "trl") -> list[ProblemRecord]:
    """The problem records of a TRL dataset (plain or conversational prompts; references as for
    `ScaleRLReward`); a `domain` column, when present, names each row's domain."""
    return [problem_record(row.get(prompt_id_key), row["prompt"], row[reference_key], domain=row.get(domain_key),
                           source=source, loc=(i,)) for i, row in enumerate(dataset)]


class CurriculumGRPOTrainer(GRPOTrainer):
    def __init__(self, *args: Any, curriculum: CurriculumSource, zero_variance: ZeroVarianceConfig | str = "keep",
                 prompt_id_key: str = "prompt_id", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.curriculum = curriculum
        self.zero_variance = (zero_variance if isinstance(zero_variance, ZeroVarianceConfig)
                              else ZeroVarianceConfig(mode=zero_variance))
        if self.zero_variance.mode == "duplicate":
            raise ValueError("zero_variance.mode: 'duplicate' is not supported by the TRL drop-in "
                             "(use keep, shrink or refill)")
        if self.zero_variance.mode == "refill" and self.accelerator.num_processes > 1:
            raise ValueError("zero_variance.mode: 'refill' runs in one process only (the kept groups would have "
                             "to move between processes); use 'shrink' with several")
        ids = self.train_dataset[prompt_id_key]
        self._row_of = {id_text(pid, (prompt_id_key, i)): i for i, pid in enumerate(ids)}
        if len(self._row_of) != len(ids):
            raise ValueError(f"{prompt_id_key}: prompt ids must be unique in train_dataset")
        self._last_rewards: torch.Tensor | None = None

    # ------------------------------------------------------------------------------------ TRL hooks
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        # The weighted sum over every process's rows (TRL gathers them): what the group baseline is taken of.
        self._last_rewards = (rewards_per_func * self.reward_weights.to(rewards_per_func.device)).nansum(dim=1)
        return rewards_per_func

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        groups = len(inputs) * self.accelerator.num_processes // self.num_generations
        out, informative = self._round(groups)
        stats = {"rounds": 0.0, "generated_groups": float(groups),
                 "zero_variance_groups": float(groups - sum(informative)), "masked_groups": 0.0}
        mode = self.zero_variance.mode
        if mode == "shrink":
            out = self._mask_groups(out, informative)
            stats["masked_groups"] = stats["zero_variance_groups"]
        elif mode == "refill":
            out = self._refill(out, informative, groups, stats)
        for name, value in {**stats, **self._informative_share(stats)}.items():
            self._metrics["train"][f"dynamic_sampling/{name}"].append(value)
        for name, value in self.curriculum.metrics().items():
            self._metrics["train"][name].append(value)
        return out

    # ------------------------------------------------------------------------------------ rounds
    def _round(self, groups: int) -> tuple[dict[str, Any], list[bool]]:
        """Draw `groups` prompts (whole batch), generate and score this process's slice, report every group."""
        ids = self._draw(groups)
        rows = [pid for pid in ids for _ in range(self.num_generations)]
        local = len(rows) // self.accelerator.num_processes
        start = self.accelerator.process_index * local
        inputs = [dict(self.train_dataset[self._row_of[pid]]) for pid in rows[start:start + local]]
        out = super()._generate_and_score_completions(inputs)
        rewards = self._last_rewards.view(-1, self.num_generations).tolist()
        outcomes = [GroupOutcome(prompt_id=pid, rewards=r) for pid, r in zip(ids, rewards)]
        if self.accelerator.is_main_process:
            self.curriculum.report(outcomes, step=self.state.global_step + 1)
        return out, [has_variance(o.rewards) for o in outcomes]

    def _draw(self, n: int) -> list[str]:
        from accelerate.utils import broadcast_object_list

        holder = [self.curriculum.draw(n) if self.accelerator.is_main_process else None]
        broadcast_object_list(holder, from_process=0)
        ids = holder[0]
        unknown = [pid for pid in ids if pid not in self._row_of]
        if unknown:
            raise KeyError(f"the curriculum drew prompt ids that are not in train_dataset: {unknown[:5]}")
        return ids

    def _refill(self, out: dict[str, Any], informative: list[bool], groups: int,
                stats: dict[str, float]) -> dict[str, Any]:
        """DAPO dynamic sampling: informative groups of up to `max_refill_rounds` further batches."""
        g = self.num_generations
        parts = [select_rows(out, group_rows(informative, g))]
        have = sum(informative)
        pending = [(out, informative)]
        while have < groups and stats["rounds"] < self.zero_variance.max_refill_rounds:
            stats["rounds"] += 1
            more, flags = self._round(groups)
            stats["generated_groups"] += groups
            stats["zero_variance_groups"] += groups - sum(flags)
            parts.append(select_rows(more, group_rows(flags, g)))
            pending.append((more, flags))
            have += sum(flags)
        batch = concat_rows(parts, self._tokenizer.pad_token_id)
        if have >= groups:
            return select_rows(batch, list(range(groups * g)))
        # Cap hit: complete the batch with zero-variance groups, masked out of the loss.
        fill = [select_rows(o, group_rows([not f for f in flags], g)) for o, flags in pending]
        filler = concat_rows(fill, self._tokenizer.pad_token_id)
        filler = select_rows(filler, list(range((groups - have) * g)))
        stats["masked_groups"] = float(groups - have)
        filler = self._mask_groups(filler, [False] * (groups - have))
        return concat_rows([batch, filler], self._tokenizer.pad_token_id)

    def _mask_groups(self, out: dict[str, Any], informative: list[bool]) -> dict[str, Any]:
        """Completion tokens of the non-informative groups masked (no loss, no token count)."""
        out = dict(out)
        local = out["completion_mask"].shape[0]
        start = self.accelerator.process_index * local
        keep = torch.tensor([informative[(start + r) // self.num_generations] for r in range(local)],
                            device=out["completion_mask"].device)
        out["completion_mask"] = out["completion_mask"] * keep.unsqueeze(1).to(out["completion_mask"].dtype)
        mask = out["completion_mask"] if "tool_mask" not in out else out["completion_mask"] * out["tool_mask"]
        out["num_items_in_batch"] = self.accelerator.gather(mask.sum()).sum()
        return out

    @staticmethod
    def _informative_share(stats: dict[str, float]) -> dict[str, float]:
        generated = stats["generated_groups"]
        return {"informative_share": (generated - stats["zero_variance_groups"]) / generated if generated else 0.0}


def group_rows(flags: Sequence[bool], generations: int) -> list[int]:
    """The row indices of the flagged groups (rows of a group are consecutive)."""
    return [g * generations + j for g, flag in enumerate(flags) if flag for j in range(generations)]


def _check_keys(out: dict[str, Any]) -> None:
    known = set(LEFT_PADDED) | set(RIGHT_PADDED) | set(PER_ROW) | {"num_items_in_batch"}
    extra = sorted(k for k, v in out.items() if v is not None and k not in known)
    if extra:
        raise ValueError(f"dynamic sampling handles text batches only; this batch also has {extra}")


def select_rows(out: dict[str, Any], rows: list[int]) -> dict[str, Any]:
    """The batch restricted to `rows` (in that order); `num_items_in_batch` recounted."""
    _check_keys(out)
    index = torch.tensor(rows, dtype=torch.long, device=out["completion_ids"].device)
    picked = {k: (v.index_select(0, index) if isinstance(v, torch.Tensor) and v.ndim > 0 else v)
              for k, v in out.items() if k != "num_items_in_batch" and v is not None}
    return _recount(picked)


def concat_rows(parts: list[dict[str, Any]], pad_token_id: int) -> dict[str, Any]:
    """Batches joined row-wise; prompts re-padded on the left, completions on the right."""
    out: dict[str, Any] = {}
    for key in parts[0]:
        if key == "num_items_in_batch":
            continue
        tensors = [p[key] for p in parts]
        if key in LEFT_PADDED or key in RIGHT_PADDED:
            fill = LEFT_PADDED.get(key, RIGHT_PADDED.get(key))
            fill = pad_token_id if fill == "pad" else fill
            width = max(t.shape[1] for t in tensors)
            left = key in LEFT_PADDED
            tensors = [_pad(t, width, fill, left) for t in tensors]
        out[key] = torch.cat(tensors, dim=0)
    return _recount(out)


def _pad(t: torch.Tensor, width: int, fill: float, left: bool) -> torch.Tensor:
    if t.shape[1] == width:
        return t
    pad = torch.full((t.shape[0], width - t.shape[1]), fill, dtype=t.dtype, device=t.device)
    return torch.cat([pad, t] if left else [t, pad], dim=1)


def _recount(out: dict[str, Any]) -> dict[str, Any]:
    mask = out["completion_mask"] if "tool_mask" not in out else out["completion_mask"] * out["tool_mask"]
    out["num_items_in_batch"] = mask.sum()
    return out
