"""NCCL weight transfer for the vLLM engine (`engine.vllm.weight_transfer = "nccl"`), on vLLM 0.32's API.

Written against `vllm>=0.32,<0.33` (`vllm/distributed/weight_transfer/`); not run on a GPU so far
(see docs/results.md): `benchmarks/gpu_check.py`'s `vllm_weight_transfer_nccl` check exercises it.

What is called, in order:
- construction: `sending_device` fails fast (no CUDA, too few GPUs) before vLLM starts;
- engine start: `AsyncEngineArgs(weight_transfer_config={"backend": "nccl"})`, so each vLLM worker
  builds vLLM's `NCCLWeightTransferEngine`;
- once, right after start (`NcclSender.__init__`, on the caller's thread, never the event loop's):
  `WeightTransferTrainerFactory.trainer_init(NCCLTrainerInitInfo(master_address="127.0.0.1",
  master_port=<free port>, world_size=1 + tensor_parallel_size, rank=0), client=LoopClient,
  source=TensorSource)` → vLLM's `NCCLTrainerWeightTransferEngine.trainer_init`, which calls
  `AsyncLLM.init_weight_transfer_engine` (the workers join as ranks 1..tp) while this process opens
  rank 0 (a TCPStore rendezvous, then a `PyNcclCommunicator` on `device`);
- each update (`NcclSender.send`, inside `VLLMEngine`'s pause(keep) → ... → version → resume):
  `NCCLTrainerWeightTransferEngine.send_weights()` → `AsyncLLM.start_weight_update` (layerwise reload
  set up) → `AsyncLLM.update_weights({names, dtype_names, shapes})` in a side thread while this thread
  broadcasts the tensors (packed, 1 GiB buffers) → `AsyncLLM.finish_weight_update()` (reload finalized).
- close: `NCCLTrainerWeightTransferEngine.shutdown()` (aborts this side's communicator).

Guarantees: the tensors sent are exactly the checkpoint names/shapes `VLLMEngine._prepare` validated,
in the engine's dtype, on `device`; nothing here runs at import time and vLLM/torch are imported only
when a sender is built. Non-guarantees: the sending rank must be on a GPU that none of vLLM's workers
uses (NCCL rejects two ranks on one device), so one process needs `tensor_parallel_size + 1` visible
GPUs (`sending_device` refuses otherwise); the tensors cross from the trainer's device to `device` first
(no saving when the trainer is on another machine: the Ray runtime still moves them through the object
store to the generator's process); a failed broadcast leaves the transfer group unusable (vLLM's
`send_weights` does not recover) and the engine must be rebuilt.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

FIELD = "engine.vllm.weight_transfer"


def sending_device(options: Any) -> int | None:
    """CUDA index of the sending rank for `VLLMOptions` with weight_transfer='nccl' (None for 'file');
    raises ValueError naming `engine.vllm.weight_transfer` when NCCL cannot work on this machine."""
    if options.weight_transfer != "nccl":
        return None
    import torch

    tensor_parallel_size, device = options.tensor_parallel_size, options.nccl_device
    if not torch.cuda.is_available():
        raise ValueError(f"{FIELD}='nccl' needs CUDA GPUs and this machine has none; use 'file'")
    index = tensor_parallel_size if device is None else device
    visible = torch.cuda.device_count()
    if index < tensor_parallel_size:
        raise ValueError(
            f"{FIELD}='nccl': nccl_device {index} is one of vLLM's worker GPUs 0..{tensor_parallel_size - 1} "
            "(NCCL rejects two ranks on one GPU)"
        )
    if index >= visible:
        raise ValueError(
            f"{FIELD}='nccl' needs GPU {index} for the sending rank besides vLLM's "
            f"{tensor_parallel_size} worker GPU(s), but {visible} GPU(s) are visible; use 'file'"
        )
    return index


class TensorSource:
    """vLLM's `WeightSource` contract (duck-typed: `metadata()` + a re-iterable `(name, tensor)` stream)
    over the tensors of the current push; vLLM checks that both channels agree while it sends."""

    def __init__(self) -> None:
        self.tensors: dict[str, Any] = {}

    def metadata(self) -> list[Any]:
        from vllm.distributed.weight_transfer import ParamMeta

        return [ParamMeta(n, t.dtype, tuple(t.shape)) for n, t in self.tensors.items()]

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return iter(list(self.tensors.items()))


class LoopClient:
    """vLLM's `VLLMWeightSyncClient` (four synchronous methods) over an `AsyncLLM` that runs on another
    thread's event loop. Must be called from a thread other than that loop's (it blocks on the loop)."""

    def __init__(self, llm: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.llm, self.loop = llm, loop

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        from vllm.distributed.weight_transfer.base import WeightTransferInitRequest

        self._run(self.llm.init_weight_transfer_engine(WeightTransferInitRequest(init_info=init_info)))

    def start_weight_update(self) -> None:
        self._run(self.llm.start_weight_update())

    def update_weights(self, update_info: Any) -> None:
        from vllm.distributed.weight_transfer.base import WeightTransferUpdateRequest

        self._run(self.llm.update_weights(WeightTransferUpdateRequest(update_info=update_info)))

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self._run(self.llm.finish_weight_update(weight_version))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NcclSender:
    """Rank 0 of the trainer↔vLLM-workers NCCL group, in the engine wrapper's process, on `device`."""

    def __init__(self, llm: Any, loop: asyncio.AbstractEventLoop, *, device: int, workers: int) -> None:
        import torch
        from vllm.distributed.weight_transfer import WeightTransferTrainerFactory
        from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo

        self.device = device
        self.source = TensorSource()
        info = NCCLTrainerInitInfo(
            master_address="127.0.0.1", master_port=_free_port(), world_size=1 + workers, rank=0
        )
        # vLLM opens the communicator and picks its streams on the *current* CUDA device.
        with torch.cuda.device(device):
            self.engine = WeightTransferTrainerFactory.trainer_init(
                info, client=LoopClient(llm, loop), source=self.source
            )

    def send(self, tensors: dict[str, Any]) -> None:
        """Broadcast `tensors` (on `self.device`) into the running model; blocks until loaded.
        Runs off the event loop (the client's RPCs are scheduled on it)."""
        import torch

        self.source.tensors = tensors
        try:
            with torch.cuda.device(self.device):
                self.engine.send_weights()
        finally:
            self.source.tensors = {}

    def close(self) -> None:
        self.engine.shutdown()
