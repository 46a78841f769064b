"""The policy update step over a Hugging Face causal LM, as one trainer rank runs it.

One step = `accumulate_shard(shard)` (forward/backward over token-budget micro-batches of this rank's
part of the batch) then `optimizer_step()` (grad-norm clip, AdamW, scheduler). The only caller is the
rank handler `scalerl.trainer.distributed.ranks` behind `scalerl.trainer.distributed.leader.RankGroup.step`,
which cuts a packed batch into `Shard`s (`scalerl.trainer.distributed.sharding.cut_batch`) for 1 or N ranks.

- Packing: `pack_samples` concatenates prompt + completion of every sample into one row with
  per-sequence position ids, so the loss tensors carry no padding; the decoder sees the row packed
  or padded per sequence (`attention_layout`, see `scalerl.trainer.core.fp32_head`), and either way each token is
  in exactly the sampler's context.
- Exact accumulation: a `Shard` carries the aggregation weights of its tokens computed on the WHOLE
  batch (`scalerl.trainer.core.losses.aggregation_weights`), sliced per micro-batch, so the summed
  micro-batch gradients equal the gradient of the whole-batch loss (micro-batch 1 × accumulation 4 ≡
  4 × 1, up to float summation order). Micro-batches are cut at sample boundaries (a sample never spans
  two, GSPO needs that) and hold at most `micro_batch_tokens` tokens, except a single longer sample
  which goes alone. With the `packed` attention layout on sdpa the mask and scores are T × T per
  micro-batch; the `auto` layout avoids that (padded per sequence unless flash attention is in use).
- Hugging Face trap: packing is honoured only without a KV cache. A training forward with the default
  `use_cache=True` gets a DynamicCache and then a plain causal mask across the packed sequences
  (measured: logits off by 0.74 on a tiny Llama). `token_logprobs` always passes `use_cache=False`.
- AdamW with the paper's defaults: lr 5e-7 reached by linear warm-up over 100 steps, then constant;
  eps 1e-15; weight decay 0.01. Departures: weight decay is applied only to parameters with ≥ 2
  dimensions (matrices, embeddings), not to norms and biases (the usual practice; the paper does not
  say); betas are torch's (0.9, 0.999) and the grad-norm clip is 1.0 (the paper does not state them).
- Precision: `auto` runs the forward under bf16 autocast where the device supports bf16 (CUDA with
  bf16), fp32 elsewhere (CPU bf16 matmuls are slow and would only add noise); master weights keep the
  model's dtype. The LM head runs in fp32 either way unless `fp32_head` is off.
- `policy_version` counts optimizer steps (it is what the generators tag tokens with after a push).
- Shards: a rank runs its whole samples, then zero-weight padding micro-batches up to the micro-batch
  count every rank runs (sharded layers gather in every micro-batch). The logprobs are the forward
  of the root module `logprob_model`, which `scalerl.trainer.distributed.sharding` shards with FSDP2.
- `activation_checkpointing`: Hugging Face gradient checkpointing (non-reentrant) on the decoder layers,
  enabled before sharding; same gradients, each layer recomputed in backward.

Non-guarantees: no sequence parallelism, one device per trainer (several
ranks: `scalerl.trainer.distributed`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

import torch
from scalerl.trainer.core.fp32_head import TokenLogprobs
from scalerl.trainer.core.losses import policy_loss
from scalerl.trainer.core.recipe_config import LossConfig, OptimConfig
from torch import Tensor, nn

log = logging.getLogger(__name__)


@dataclass
class PackedBatch:
    """Packed token tensors, all `[num_tokens]` except `cu_seqlens [num_samples + 1]`.

    Token-aligned: `gen_logprobs[t]`, `loss_mask[t]` and `advantages[t]` belong to token t, whose
    logprob under the trainer is `token_logprobs(...)[t]`. Prompt tokens have loss_mask 0."""

    input_ids: Tensor
    position_ids: Tensor
    cu_seqlens: Tensor
    gen_logprobs: Tensor
    advantages: Tensor
    sample_ids: Tensor
    group_ids: Tensor
    loss_mask: Tensor

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def num_samples(self) -> int:
        return int(self.cu_seqlens.shape[0]) - 1

    def to(self, device: torch.device | str) -> PackedBatch:
        return PackedBatch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    def select_samples(self, start: int, stop: int) -> PackedBatch:
        """Samples [start, stop) as their own packed batch (ids unchanged)."""
        lo, hi = int(self.cu_seqlens[start]), int(self.cu_seqlens[stop])
        per_token = {f.name: getattr(self, f.name)[lo:hi] for f in fields(self) if f.name != "cu_seqlens"}
        return PackedBatch(cu_seqlens=self.cu_seqlens[start : stop + 1] - lo, **per_token)


@dataclass
class Shard:
    """One trainer rank's part of a batch: whole samples, the aggregation weights of their tokens
    computed on the WHOLE batch, and the micro-batch count every rank runs this step (the ones past
    this rank's own are zero-weight padding). `loss_scale` is the number of ranks: data-parallel
    gradient reduction averages over ranks, so the scaled rank losses average to the whole-batch loss."""

    batch: PackedBatch
    token_weights: Tensor
    micro_batches: int
    loss_scale: float = 1.0


def _check_sample(i: int, prompt: Sequence[int], completion: Sequence[int], lps, mask) -> None:
    if len(prompt) == 0:
        raise ValueError(f"sample {i}: prompt_ids is empty (the first token needs no logprob, a prompt does)")
    if not (len(completion) == len(lps) == len(mask)):
        raise ValueError(
            f"sample {i}: completion_ids ({len(completion)}), gen_logprobs ({len(lps)}) and "
            f"loss_masks ({len(mask)}) must have the same length"
        )


def pack_samples(
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    gen_logprobs: Sequence[Sequence[float]],
    loss_masks: Sequence[Sequence[int]],
    advantages: Sequence[float],
    group_ids: Sequence[int],
) -> PackedBatch:
    """Pack per-sample lists into a `PackedBatch`; sample ids are 0..N-1 in the given order."""
    n = len(prompt_ids)
    lengths = {
        "completion_ids": len(completion_ids),
        "gen_logprobs": len(gen_logprobs),
        "loss_masks": len(loss_masks),
        "advantages": len(advantages),
        "group_ids": len(group_ids),
    }
    bad = {k: v for k, v in lengths.items() if v != n}
    if bad or n == 0:
        raise ValueError(
            f"pack_samples needs the same non-zero number of samples everywhere: prompt_ids {n}, {bad}"
        )
    ids, lps, masks, adv, sids, gids, seq_lens = [], [], [], [], [], [], []
    for i in range(n):
        p, c = list(prompt_ids[i]), list(completion_ids[i])
        _check_sample(i, p, c, gen_logprobs[i], loss_masks[i])
        length = len(p) + len(c)
        ids += p + c
        lps += [0.0] * len(p) + [float(x) for x in gen_logprobs[i]]
        masks += [False] * len(p) + [bool(x) for x in loss_masks[i]]
        adv += [float(advantages[i])] * length
        sids += [i] * length
        gids += [int(group_ids[i])] * length
        seq_lens.append(length)
    cu = torch.zeros(n + 1, dtype=torch.long)
    cu[1:] = torch.cumsum(torch.tensor(seq_lens), 0)
    starts = torch.repeat_interleave(cu[:-1], torch.tensor(seq_lens))
    return PackedBatch(
        input_ids=torch.tensor(ids, dtype=torch.long),
        position_ids=torch.arange(len(ids)) - starts,
        cu_seqlens=cu,
        gen_logprobs=torch.tensor(lps, dtype=torch.float32),
        advantages=torch.tensor(adv, dtype=torch.float32),
        sample_ids=torch.tensor(sids, dtype=torch.long),
        group_ids=torch.tensor(gids, dtype=torch.long),
        loss_mask=torch.tensor(masks, dtype=torch.bool),
    )


def micro_batch_bounds(cu_seqlens: Tensor, max_tokens: int) -> list[tuple[int, int]]:
    """Consecutive sample ranges [start, stop) of at most `max_tokens` tokens (one oversize sample alone)."""
    lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
    bounds, start, used = [], 0, 0
    for i, length in enumerate(lengths):
        if i > start and used + length > max_tokens:
            bounds.append((start, i))
            start, used = i, 0
        used += length
    if lengths:
        bounds.append((start, len(lengths)))
    return bounds


def merge_metrics(parts: Sequence[dict[str, float]]) -> dict[str, float]:
    """Combine micro-batch metrics: sums for `loss` and counts, min/max for extremes, loss-token-weighted means."""
    merged: dict[str, float] = {}
    weights = [p.get("tokens/loss", 0.0) for p in parts]
    total = sum(weights)
    for key in {k for p in parts for k in p}:
        vals = [(p[key], w) for p, w in zip(parts, weights) if key in p]
        if key == "loss" or key.startswith("tokens/"):
            merged[key] = sum(v for v, _ in vals)
        elif key.endswith("/max"):
            merged[key] = max(v for v, _ in vals)
        elif key.endswith("/min"):
            merged[key] = min(v for v, _ in vals)
        elif total > 0:
            merged[key] = sum(v * w for v, w in vals) / total
    return merged


def build_optimizer(
    model: nn.Module, cfg: OptimConfig
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW (decay on ≥2-D parameters only) and the warm-up-then-constant schedule."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)
    warm = cfg.warmup_steps
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)
    return opt, sched


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for `precision` on `device`, or None for plain fp32."""
    if precision == "fp32":
        return None
    supported = device.type == "cuda" and torch.cuda.is_bf16_supported()
    if precision == "bf16":
        return torch.bfloat16
    return torch.bfloat16 if supported else None


class PolicyTrainer:
    """Holds the model, AdamW and the schedule; see the module docstring for the step.

    The logprobs are the `forward` of `logprob_model` (`TokenLogprobs` around `model`, at `temperature`: the
    engine's sampling temperature, or the importance ratio is off-policy by construction), the root module
    a data-parallel wrapper shards; `shard`, when given, does that in place before AdamW sees the
    parameters (`scalerl.trainer.distributed.sharding`)."""

    def __init__(self, model: nn.Module, optim_cfg: OptimConfig, loss_cfg: LossConfig, *, temperature: float = 1.0,
                 shard: Callable[[nn.Module], None] | None = None) -> None:
        self.model = model
        self.optim_cfg = optim_cfg
        self.loss_cfg = loss_cfg
        if optim_cfg.activation_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.logprob_model = TokenLogprobs(model, temperature=temperature,
                                           fp32_head=optim_cfg.fp32_head, layout=optim_cfg.attention_layout)
        if shard is not None:
            shard(self.logprob_model)
        self.device = next(model.parameters()).device
        self.optimizer, self.scheduler = build_optimizer(model, optim_cfg)
        self.step_count = 0
        self.policy_version = 0
        self._amp = autocast_dtype(optim_cfg.precision, self.device)

    def _autocast(self) -> torch.autocast:
        return torch.autocast(self.device.type, dtype=self._amp or torch.bfloat16, enabled=self._amp is not None)

    def micro_batch_logprobs(self, mb: PackedBatch) -> Tensor:
        with self._autocast():
            return self.logprob_model(mb.input_ids, mb.position_ids)

    def accumulate_shard(self, shard: Shard) -> list[dict[str, float]]:
        """Forward and backward over this rank's micro-batches, then zero-weight padding micro-batches up
        to `shard.micro_batches`; returns the loss metrics of each real micro-batch."""
        self.model.train()
        batch = shard.batch.to(self.device)
        weights = shard.token_weights.to(self.device)
        bounds = micro_batch_bounds(batch.cu_seqlens, self.optim_cfg.micro_batch_tokens)
        parts = []
        for start, stop in bounds:
            mb = batch.select_samples(start, stop)
            lo, hi = int(batch.cu_seqlens[start]), int(batch.cu_seqlens[stop])
            logprobs = self.micro_batch_logprobs(mb)
            loss, metrics = policy_loss(
                logprobs, mb.gen_logprobs, mb.advantages, mb.sample_ids, mb.group_ids, mb.loss_mask,
                self.loss_cfg, token_weights=weights[lo:hi])
            (loss * shard.loss_scale if shard.loss_scale != 1.0 else loss).backward()
            parts.append(metrics)
        for _ in range(shard.micro_batches - len(bounds)):
            self._padding_micro_batch()
        return parts

    def _padding_micro_batch(self) -> None:
        """A forward and backward whose loss weighs 0: sharded layers gather and reduce in every
        micro-batch, so each rank must run as many as the busiest rank (its gradients add exact zeros)."""
        ids = torch.zeros(2, dtype=torch.long, device=self.device)
        with self._autocast():
            logprobs = self.logprob_model(ids, torch.arange(2, device=self.device))
        (logprobs.sum() * 0.0).backward()

    def optimizer_step(self) -> dict[str, float]:
        """Clip, step AdamW and the schedule, zero the gradients; bumps `policy_version`."""
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        max_norm = self.optim_cfg.max_grad_norm
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm is not None else float("inf"))
        norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm  # sharded grads: the global norm
        lr = self.scheduler.get_last_lr()[0]
        skipped = not bool(torch.isfinite(norm))
        if skipped:
            log.warning("non-finite gradient norm at step %d: update skipped", self.step_count)
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step_count += 1
        self.policy_version += 1
        return {
            "grad_norm": float(norm),
            "lr": lr,
            "step": float(self.step_count),
            "update_skipped": float(skipped),
        }
