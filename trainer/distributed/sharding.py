"""Data-parallel trainer ranks: how a batch is split, how the policy is sharded, how weights come back.

- `cut_batch(batch, aggregation, world, micro_batch_tokens)`: rank 0 computes the aggregation weights
  on the WHOLE batch (`scalerl.trainer.core.losses.aggregation_weights`; the one place the update
  computes them, for 1 or N ranks) and cuts the packed batch into `world` contiguous runs of whole
  samples, balanced by tokens (each cut at the sample boundary nearest to an equal token share), each
  carrying its tokens' weights and the micro-batch count of the busiest rank. Every rank then runs
  that many micro-batches, padding with zero-weight ones, because FSDP's per-layer all-gathers are
  collective. With `loss_scale` = world and the default gradient averaging, the summed update equals
  the single-rank update on the whole batch (up to float summation order). A rank may get no samples
  (fewer samples than ranks): it runs padding micro-batches only.
- `shard_policy(root)`: FSDP2 (`fully_shard`) on every decoder layer, then on the root module
  (`scalerl.trainer.core.fp32_head.TokenLogprobs`, whose forward runs decoder, FP32 head and logprobs, so no
  computation bypasses the root). `param_dtype=bf16` (`optim.precision` resolving to bf16,
  `scalerl.trainer.core.update.autocast_dtype`) gives the decoder layers FSDP2's `MixedPrecisionPolicy(param_dtype=bf16,
  reduce_dtype=fp32)`: they are all-gathered and run in bf16 and their gradients are reduced in fp32 into
  the fp32 master shards; the root keeps fp32 so the FP32 head reads the fp32 weights (as on one rank).
  Without it, parameters are gathered in the model's dtype and autocast does the rest as on one rank.
- `full_state_dict(root)`: collective; every rank must call it. Rank 0 gets plain CPU tensors under
  the Hugging Face names (the `policy.` prefix of the root stripped), every other rank `{}`.

Not guaranteed: balance by compute (tokens are a proxy; attention cost grows with sequence length);
models whose decoder layers are not `model.<base_model_prefix>.layers`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import torch
from scalerl.trainer.core.losses import aggregation_weights
from scalerl.trainer.core.recipe_config import Aggregation
from scalerl.trainer.core.update import PackedBatch, Shard, micro_batch_bounds
from torch import Tensor, nn

PREFIX = "policy."  # TokenLogprobs keeps the Hugging Face model as `self.policy`


def cut_points(cu_seqlens: Tensor, world: int) -> list[tuple[int, int]]:
    """`world` contiguous sample ranges [start, stop) covering every sample, balanced by tokens.

    Cut r sits at the sample boundary nearest to r/world of the tokens (never before cut r-1), so
    each range is within one sample's length of an equal share; ranges may be empty."""
    if world < 1:
        raise ValueError(f"world size must be >= 1, got {world}")
    cu = [int(x) for x in cu_seqlens.tolist()]
    n, total = len(cu) - 1, cu[-1]
    cuts = [0]
    for r in range(1, world):
        target = total * r / world
        i = int(torch.searchsorted(torch.tensor(cu, dtype=torch.float64), target))
        i = min(i, n)
        if i > 0 and abs(cu[i - 1] - target) <= abs(cu[i] - target):
            i -= 1
        cuts.append(max(i, cuts[-1]))
    cuts.append(n)
    return list(zip(cuts[:-1], cuts[1:]))


def cut_batch(batch: PackedBatch, aggregation: Aggregation, world: int, micro_batch_tokens: int) -> list[Shard]:
    """One `Shard` per rank, with the whole batch's aggregation weights (see the module docstring)."""
    token_weights = aggregation_weights(batch.sample_ids, batch.group_ids, batch.loss_mask, aggregation)
    shards = []
    for start, stop in cut_points(batch.cu_seqlens, world):
        lo, hi = int(batch.cu_seqlens[start]), int(batch.cu_seqlens[stop])
        part = batch.select_samples(start, stop)
        shards.append(Shard(part, token_weights[lo:hi], 0, float(world)))
    busiest = max(len(micro_batch_bounds(s.batch.cu_seqlens, micro_batch_tokens)) for s in shards)
    busiest = max(busiest, 1)  # an empty step still runs one (zero-weight) micro-batch per rank
    for s in shards:
        s.micro_batches = busiest
    return shards


def decoder_layers(policy: nn.Module) -> list[nn.Module]:
    """The decoder layers of a Hugging Face causal LM (`model.<base_model_prefix>.layers`)."""
    decoder = getattr(policy, getattr(policy, "base_model_prefix", "model"), None)
    layers = getattr(decoder, "layers", None)
    if layers is None:
        raise TypeError(f"{type(policy).__name__}: no decoder layers at .{policy.base_model_prefix}.layers")
    return list(layers)


def shard_policy(root: nn.Module, mesh: Any = None, param_dtype: torch.dtype | None = None) -> None:
    """FSDP2 in place: each decoder layer of `root.policy`, then `root` (parameters become DTensors);
    `param_dtype` set: the layers' mixed-precision policy (see the module docstring)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    layer_mp = MixedPrecisionPolicy() if param_dtype is None else MixedPrecisionPolicy(
        param_dtype=param_dtype, reduce_dtype=torch.float32)
    for layer in decoder_layers(root.policy):
        fully_shard(layer, mesh=mesh, mp_policy=layer_mp)
    fully_shard(root, mesh=mesh)


def full_state_dict(root: nn.Module) -> dict[str, Tensor]:
    """Collective gather of the full weights: rank 0 gets CPU tensors with Hugging Face names, others {}."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return {k.removeprefix(PREFIX): v for k, v in get_model_state_dict(root, options=opts).items()}


def broadcast_weights(root: nn.Module, weights: Mapping[str, Tensor]) -> None:
    """Load rank 0's full `weights` (Hugging Face names) into every rank's shards; collective (others pass {})."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    full = {PREFIX + k: v for k, v in weights.items()}
    opts = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    set_model_state_dict(root, full, options=opts)


def state_bytes(weights: Mapping[str, Tensor]) -> int:
    """Bytes held by a state dict (tied tensors counted once)."""
    seen: dict[int, int] = {}
    for t in weights.values():
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(seen.values())


def timed_gather(root: nn.Module) -> tuple[dict[str, Tensor], dict[str, float]]:
    """`full_state_dict` and its cost: seconds, bytes of the gathered copy, peak RSS of this process."""
    import resource

    t0 = time.perf_counter()
    weights = full_state_dict(root)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: KiB
    return weights, {"push/gather_s": time.perf_counter() - t0, "push/gather_bytes": float(state_bytes(weights)),
                     "push/peak_rss_bytes": float(peak_kib * 1024)}
