"""The memory plan checked against PyTorch without a GPU: the project's update step under fake tensors.

`measure_update_step(shape, cfg, ...)` builds the Hugging Face model of `shape` under
`torch._subclasses.fake_tensor.FakeTensorMode` (shapes, no storage), runs `PolicyTrainer.accumulate`
(FP32 head, CISPO, micro-batches, autocast) and `optimizer_step` (AdamW) under
`torch.distributed._tools.mem_tracker.MemTracker`, and returns what the tracker counted per category;
`fake_torch_engine_kv_bytes` builds the torch engine's decoder under fake tensors and returns the bytes
its KV cache allocates. Both cost seconds on a CPU for any model size (nothing is computed).

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

from trainer.memory.shapes import ModelShape

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
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from trainer.core.update import pack_samples

    prompt = min(8, seq_len - 1)
    c = seq_len - prompt
    with unset_fake_temporarily():  # real tensors, then fake constants of them
        b = pack_samples([[1] * prompt] * samples, [[2] * c] * samples, [[-1.0] * c] * samples, [[1] * c] * samples,
                         [1.0] * samples, list(range(samples)))
    conv = mode.fake_tensor_converter
    return type(b)(**{f.name: conv.from_real_tensor(mode, getattr(b, f.name), make_constant=True)
                      for f in dataclasses.fields(b)}), b


def measure_update_step(shape: ModelShape, optim: Any, loss: Any, *, samples: int, seq_len: int) -> dict[str, int]:
    """Bytes the tracker counts for one update step on `samples` equal-length samples of `seq_len` tokens:
    `parameters`, `gradients` (after accumulation), `optimizer states`, and `peak_transient` (the peak of
    activations + temporaries during accumulation, i.e. activations, logits and the FP32 head together)."""
    from torch.distributed._tools.mem_tracker import MemTracker
    from transformers import AutoModelForCausalLM

    from trainer.core.update import PolicyTrainer

    with fake_values() as mode:
        model = AutoModelForCausalLM.from_config(hf_config(shape), attn_implementation="sdpa")
        trainer = PolicyTrainer(model, optim, loss)
        batch, real = _batch(samples, seq_len, mode)
        _KEEP.append(real)  # the constants' storage: fake tensors that outlive this call may still read it
        tracker = MemTracker()
        tracker.track_external(model, trainer.optimizer)
        with tracker:
            trainer.accumulate(batch)
            peak = _by_kind(tracker.get_tracker_snapshot("peak"))
            grads = _by_kind(tracker.get_tracker_snapshot("current"))["Gradient"]
            trainer.optimizer_step()
            after = _by_kind(tracker.get_tracker_snapshot("current"))
    return {"parameters": after["Parameter"], "gradients": grads, "optimizer states": after["Optstate"],
            "peak_transient": peak["Activation"] + peak["Temp"]}


def _by_kind(snapshot: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for per_device in snapshot.values():
        for kind, nbytes in per_device.items():
            key = getattr(kind, "value", kind)
            out[key] = out.get(key, 0) + nbytes
    return out


def fake_torch_engine_kv_bytes(shape: ModelShape, *, slots: int, max_seq_len: int, dtype: torch.dtype) -> int:
    """Bytes of K/V tensors the torch engine's decoder allocates for `slots` x `max_seq_len` (fake tensors)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from transformers import AutoModelForCausalLM

    from trainer.engines.torch_decoder import SlotDecoder

    mode = FakeTensorMode(allow_non_fake_inputs=True)  # plain mode: the decoder reads no values
    mode.cache_enabled = False
    with mode:
        model = AutoModelForCausalLM.from_config(hf_config(shape))
        dec = SlotDecoder(model, device="cpu", dtype=dtype, max_slots=slots, max_seq_len=max_seq_len)
        return sum(t.numel() * t.element_size() for t in dec.k + dec.v)


def measure_isolated(jobs: list[dict[str, Any]], timeout_s: float = 300.0) -> list[dict[str, int]]:
    """`measure_update_step` for each job `{"shape": config.json path, "layers": n, "overrides": [...],
    "samples": s, "seq_len": t}`, or `fake_torch_engine_kv_bytes` for `{"kind": "kv", "shape", "layers",
    "slots", "max_seq_len", "dtype": "bfloat16"}` (result `{"kv": bytes}`), in a child process
    (`python -m trainer.memory.measure`).

    Why a child: after `fake_values()` has patched the fake-tensor op table and made constants, a later
    FakeTensorMode in the same process can segfault (torch 2.13, seen in tests); the child keeps the
    caller's process clean (fake tensors and meta-device models in one process have corrupted the heap
    at exit). The child's measurements are the same functions'."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "trainer.memory.measure"], input=json.dumps(jobs),
                          capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"measurement child failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _child_main() -> None:
    import json
    import sys

    from scalerl_env.contracts.config import load_config
    from trainer.config.train import TrainConfig

    out = []
    for job in json.loads(sys.stdin.read()):
        shape = ModelShape.from_folder(job["shape"]).with_layers(job["layers"])
        if job.get("kind") == "kv":
            out.append({"kv": fake_torch_engine_kv_bytes(shape, slots=job["slots"], max_seq_len=job["max_seq_len"],
                                                         dtype=getattr(torch, job["dtype"]))})
            continue
        cfg = load_config(TrainConfig, None, job["overrides"])
        out.append(measure_update_step(shape, cfg.optim, cfg.loss, samples=job["samples"], seq_len=job["seq_len"]))
    print(json.dumps(out))


if __name__ == "__main__":
    _child_main()
