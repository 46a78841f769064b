"""The memory plan checked against PyTorch without a GPU: the project's update step under fake tensors.

`measure_update_step(shape, optim, loss, ...)` builds the Hugging Face model of `shape` under
`torch._subclasses.fake_tensor.FakeTensorMode` (shapes, no storage), runs `PolicyTrainer.accumulate_shard`
on the whole batch (FP32 head, CISPO, micro-batches, autocast) and `optimizer_step` (AdamW) under
`torch.distributed._tools.mem_tracker.MemTracker`, and returns what the tracker counted per category;
`measure_fsdp_step(shape, optim, loss, ..., world=N)` does the same for rank 0 of N FSDP2 ranks
(`scalerl.trainer.distributed.sharding.shard_policy` over a fake process group,
`torch.testing._internal.distributed.fake_pg`: collectives return without communicating) under
`torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker`; `torch_engine_kv_bytes` builds the
torch engine's decoder (real tensors, the shape's attention geometry) and returns the bytes its KV
cache allocates. Each costs seconds on a CPU for any model size. Not measured under FSDP2: rank 0's
plain `mirror` (outside the sharded model), overlap of communication streams on a GPU.

Fake tensors have no values, so three rules of this harness stand in for them, inside `fake_values()`
only (restored on exit): small tensors made from real data stay real (the batch bookkeeping: sample
ids, boundaries, aggregation weights), a scalar read from a fake tensor is 1 (loss metrics, the
finite-gradient check), and a fake boolean mask selects every element (the padded layout's mask, which
is all true for samples of equal length: the harness packs equal-length samples). Not measured here:
allocator fragmentation, CUDA workspaces, flash-attention kernels (the CPU build runs sdpa).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import torch
from scalerl.trainer.core.recipe_config import LossConfig, OptimConfig
from scalerl.trainer.memory.shapes import ModelShape

_KEEP: list[Any] = []
"""Real batches behind fake constants, kept for the process (a few KB per measurement): freeing one
while any fake tensor made from it survives segfaults the next fake-tensor dispatch (torch 2.13)."""


@contextlib.contextmanager
def fake_values() -> Iterator[Any]:
    """A FakeTensorMode with the three rules of the module docstring."""
    import torch._subclasses.fake_impls as fi
    import torch._subclasses.fake_tensor as ft

    aten = torch.ops.aten
    table = fi.op_implementations_dict
    saved = (ft.CONSTANT_NUMEL_LIMIT, table.get(aten._local_scalar_dense.default), table.get(aten.nonzero.default))

    def scalar(fake_mode: Any, func: Any, arg: Any) -> int:
        return 1

    def nonzero(fake_mode: Any, func: Any, arg: Any) -> torch.Tensor:
        with fake_mode:
            return torch.empty((arg.numel(), arg.dim()), dtype=torch.long, device=arg.device)

    ft.CONSTANT_NUMEL_LIMIT = 1 << 22
    table[aten._local_scalar_dense.default], table[aten.nonzero.default] = scalar, nonzero
    try:
        mode = ft.FakeTensorMode(allow_non_fake_inputs=True)
        mode.cache_enabled = False  # cached outputs of constant ops outlive their storage: segfaults later
        with mode:
            yield mode
    finally:
        ft.FakeTensorMode.cache_clear()  # cached outputs may reference the constants' freed storage
        ft.CONSTANT_NUMEL_LIMIT = saved[0]
        for op, impl in ((aten._local_scalar_dense.default, saved[1]), (aten.nonzero.default, saved[2])):
            if impl is None:
                table.pop(op, None)
            else:
                table[op] = impl


def hf_config(shape: ModelShape) -> Any:
    from transformers import AutoConfig

    return AutoConfig.for_model(
        shape.model_type, hidden_size=shape.hidden, intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers, num_attention_heads=shape.heads, num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim, vocab_size=shape.vocab, tie_word_embeddings=shape.tied,
        attention_bias=shape.qkv_bias and shape.model_type != "qwen2", use_sliding_window=False)


def _batch(samples: int, seq_len: int, mode: Any) -> tuple[Any, Any]:
    """(fake batch, the real batch it was made from). The fake tensors are constants that *reference*
    the real ones' storage: the caller must keep the real batch alive while the fake one is used
    (a freed one segfaults in constant propagation)."""
    from scalerl.trainer.core.update import pack_samples
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    prompt = min(8, seq_len - 1)
    c = seq_len - prompt
    with unset_fake_temporarily():  # real tensors, then fake constants of them
        b = pack_samples([[1] * prompt] * samples, [[2] * c] * samples, [[-1.0] * c] * samples, [[1] * c] * samples,
                         [1.0] * samples, list(range(samples)))
    conv = mode.fake_tensor_converter
    return type(b)(**{f.name: conv.from_real_tensor(mode, getattr(b, f.name), make_constant=True)
                      for f in dataclasses.fields(b)}), b


def measure_update_step(shape: ModelShape, optim: OptimConfig, loss: LossConfig, *, samples: int,
                        seq_len: int) -> dict[str, int]:
    """Bytes the tracker counts for one update step on `samples` equal-length samples of `seq_len` tokens:
    `parameters`, `gradients` (after accumulation), `optimizer states`, and `peak_transient` (the peak of
    activations + temporaries during accumulation, i.e. activations, logits and the FP32 head together)."""
    from scalerl.trainer.core.update import PolicyTrainer
    from torch.distributed._tools.mem_tracker import MemTracker
    from transformers import AutoModelForCausalLM

    with fake_values() as mode:
        model = AutoModelForCausalLM.from_config(hf_config(shape), attn_implementation="sdpa")
        trainer = PolicyTrainer(model, optim, loss)
        batch, real = _batch(samples, seq_len, mode)
        _KEEP.append(real)  # the constants' storage: fake tensors that outlive this call may still read it
        tracker = MemTracker()
        tracker.track_external(model, trainer.optimizer)
        peak, grads, after = _tracked_step(tracker, trainer, batch, "Gradient")
    return {"parameters": after["Parameter"], "gradients": grads, "optimizer states": after["Optstate"],
            "peak_transient": peak["Activation"] + peak["Temp"]}


def _tracked_step(tracker: Any, trainer: Any, batch: Any, grad_kind: str) -> tuple[dict, int, dict]:
    """One update under `tracker`: the peak by kind, the gradients after backward, and every kind after
    the optimizer step (when AdamW's states exist)."""
    from scalerl.trainer.distributed.sharding import cut_batch

    # the whole batch on this rank, as the measured plan assumes (one shard of one rank)
    shard = cut_batch(batch, trainer.loss_cfg.aggregation, 1, trainer.optim_cfg.micro_batch_tokens)[0]
    with tracker:
        trainer.accumulate_shard(shard)
        peak = _by_kind(tracker.get_tracker_snapshot("peak"))
        grads = _by_kind(tracker.get_tracker_snapshot("current"))[grad_kind]
        trainer.optimizer_step()
        after = _by_kind(tracker.get_tracker_snapshot("current"))
    return peak, grads, after


def measure_fsdp_step(shape: ModelShape, optim: OptimConfig, loss: LossConfig, *, samples: int, seq_len: int,
                      world: int) -> dict[str, int]:
    """Rank 0 of `world` FSDP2 ranks, one update step on the same batch as `measure_update_step`:
    `parameters`, `gradients`, `optimizer states` (the rank's shards), `gathered` (the most unsharded
    parameters + all-gather + reduce-scatter buffers held at once) and `peak_transient` (the most
    activations + temporaries held at once), each the maximum over every module's snapshots and the
    step's peak (with a large untied head the total peaks in the forward, where the gathered root
    group dominates, not at the logits' backward peak). Initializes the process group:
    one call per process (`measure_isolated` runs each job in its own)."""
    from functools import partial

    import torch.distributed as dist
    from scalerl.trainer.core.update import PolicyTrainer, autocast_dtype
    from scalerl.trainer.distributed.sharding import shard_policy
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from transformers import AutoModelForCausalLM

    # as scalerl.trainer.distributed.ranks.build_trainer: bf16 precision gathers the layers in bf16 (FSDP2 mixed
    # precision)
    param_dtype = autocast_dtype(optim.precision, torch.device("cpu"))
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    mesh = init_device_mesh("cpu", (world,))  # real: under fake_values() its rank lookup would select all
    with fake_values() as mode:
        model = AutoModelForCausalLM.from_config(hf_config(shape), attn_implementation="sdpa")
        trainer = PolicyTrainer(model, optim, loss, shard=partial(shard_policy, mesh=mesh, param_dtype=param_dtype))
        batch, real = _batch(samples, seq_len, mode)
        _KEEP.append(real)
        tracker = FSDPMemTracker(trainer.logprob_model, trainer.optimizer)
        peak, grads, after = _tracked_step(tracker, trainer, batch, "Sharded Grad")
    snaps = [peak] + [_by_kind(k) for st in tracker.memory_tracking.values() for ks in st.snapshots.values()
                      for k in ks]
    return {"parameters": after["Sharded Param"], "gradients": grads, "optimizer states": after["OptState"],
            "gathered": max(k["Unsharded Param"] + k["All Gather"] + k["Reduce Scatter"] for k in snaps),
            "peak_transient": max(k["Activation"] + k["Temp"] for k in snaps)}


def _by_kind(snapshot: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for per_device in snapshot.values():
        for kind, nbytes in per_device.items():
            key = getattr(kind, "value", kind)
            out[key] = out.get(key, 0) + nbytes
    return out


def torch_engine_kv_bytes(shape: ModelShape, *, slots: int, max_seq_len: int, dtype: torch.dtype) -> int:
    """Bytes of K/V tensors the torch engine's decoder really allocates for `slots` x `max_seq_len`.

    The cache depends only on layers, KV heads, head dim and dtype, so the decoder is built on a real
    model with `shape`'s attention geometry and a tiny MLP and vocabulary (megabytes, not the full
    model; no fake tensors: `transformers` reads data pointers while it builds a model, which is
    undefined on fake tensors and has segfaulted here)."""
    from scalerl.trainer.engines.torch_decoder import SlotDecoder
    from transformers import AutoModelForCausalLM

    small = ModelShape(**{**shape.__dict__, "intermediate": 8, "vocab": 16})
    model = AutoModelForCausalLM.from_config(hf_config(small))
    dec = SlotDecoder(model, device="cpu", dtype=dtype, max_slots=slots, max_seq_len=max_seq_len)
    return sum(t.numel() * t.element_size() for t in dec.k + dec.v)


def measure_isolated(jobs: list[dict[str, Any]], timeout_s: float = 300.0) -> list[dict[str, int]]:
    """`measure_update_step` for each job `{"shape": config.json path, "layers": n, "overrides": [...],
    "samples": s, "seq_len": t}` (`measure_fsdp_step` when the job has `"world": N > 1`), each in its
    own child process (`python -m scalerl.trainer.memory.measure`),
    the children running at the same time.

    Why one child per job: after `fake_values()` has patched the fake-tensor op table and made
    constants, a later fake-tensor dispatch in the same process can segfault (torch 2.13; seen in tests,
    not every time). A fresh process per measurement keeps each one, and the caller, clean. The
    children run the same functions the module exports."""
    import json
    import subprocess
    import sys

    procs = [subprocess.Popen([sys.executable, "-m", "scalerl.trainer.memory.measure"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in jobs]
    results = []
    for proc, job in zip(procs, jobs, strict=True):
        out, err = proc.communicate(json.dumps([job]), timeout=timeout_s)
        if proc.returncode != 0:
            raise RuntimeError(f"measurement child failed ({proc.returncode}) on {job}: {err[-2000:]}")
        results += json.loads(out.strip().splitlines()[-1])
    return results


def _child_main() -> None:
    import json
    import sys

    from scalerl.env.contracts.config_loader import load_config
    from scalerl.trainer.config.train import TrainConfig

    out = []
    for job in json.loads(sys.stdin.read()):
        shape = ModelShape.from_folder(job["shape"]).with_layers(job["layers"])
        cfg = load_config(TrainConfig, None, job["overrides"])
        size = {"samples": job["samples"], "seq_len": job["seq_len"]}
        if job.get("world", 1) > 1:
            out.append(measure_fsdp_step(shape, cfg.optim, cfg.loss, world=job["world"], **size))
        else:
            out.append(measure_update_step(shape, cfg.optim, cfg.loss, **size))
    print(json.dumps(out))


if __name__ == "__main__":
    _child_main()
