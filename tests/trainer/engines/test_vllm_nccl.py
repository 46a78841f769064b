"""`engine.vllm.weight_transfer = "nccl"` without a GPU: what can be checked on CPU.

The NCCL broadcast itself needs CUDA GPUs and is checked by `benchmarks/gpu_check.py`
(`vllm_weight_transfer_nccl`). Here: construction fails fast with an error naming the setting (no
vLLM needed), and, in `.venv-vllm`, our two adapters satisfy vLLM 0.32's own contracts (the
`WeightSource` is fed through vLLM's own sender-side consistency check; the client is vLLM's
runtime-checkable protocol and calls `AsyncLLM`'s methods with vLLM's request types).
"""

from __future__ import annotations

import asyncio
import inspect
import threading

import pytest
import torch
from pydantic import ValidationError
from scalerl.trainer.engines.engine_config import VLLMOptions
from scalerl.trainer.engines.vllm_engine import VLLMEngine


def _engine_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "vllm-engine"]


@pytest.mark.parametrize("nccl_device", [0, None])
def test_nccl_fails_fast_where_it_cannot_work(tmp_path, nccl_device):
    if nccl_device is None and torch.cuda.device_count() > 1:
        pytest.skip("two GPUs here: NCCL with the default device can work (gpu_check covers it)")
    before = _engine_threads()
    # GPU 0 is vLLM's worker: refused on every machine (no CUDA, or two NCCL ranks on one GPU).
    opts = VLLMOptions(weight_transfer="nccl", nccl_device=nccl_device)
    with pytest.raises(ValueError, match=r"engine\.vllm\.weight_transfer='nccl'"):
        VLLMEngine(tmp_path, eos_token_id=0, options=opts)  # an empty folder: refused before it is read
    assert _engine_threads() == before  # nothing was started


def test_weight_transfer_option_is_validated():
    assert VLLMOptions().weight_transfer == "file"
    with pytest.raises(ValidationError, match="weight_transfer"):
        VLLMOptions(weight_transfer="gloo")
    with pytest.raises(ValidationError, match="nccl_device"):
        VLLMOptions(nccl_device=-1)


@pytest.mark.vllm
def test_tensor_source_passes_vllms_sender_check():
    pytest.importorskip("vllm", reason="runs in .venv-vllm")
    from scalerl.trainer.engines.vllm_nccl import TensorSource
    from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerWeightTransferEngine

    src = TensorSource()
    src.tensors = {"a.weight": torch.zeros(2, 3), "b.bias": torch.ones(4, dtype=torch.bfloat16)}
    meta = src.metadata()
    assert [(m.name, m.dtype, m.shape) for m in meta] == [
        ("a.weight", torch.float32, (2, 3)),
        ("b.bias", torch.bfloat16, (4,)),
    ]
    sent = list(NCCLTrainerWeightTransferEngine._checked_iter(src, meta))
    assert [n for n, _ in sent] == ["a.weight", "b.bias"]
    assert [n for n, _ in src] == ["a.weight", "b.bias"]  # re-iterable: one pass per update
    src.tensors["a.weight"] = torch.zeros(3, 3)  # a stream that disagrees with what was announced
    with pytest.raises(ValueError, match="disagrees"):
        list(NCCLTrainerWeightTransferEngine._checked_iter(src, meta))


class _RecordingLLM:
    """The other side of the client: records what `AsyncLLM` would be awaited with."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object, str]] = []

    def _rec(self, name: str, arg: object = None):
        async def run() -> None:
            self.calls.append((name, arg, threading.current_thread().name))

        return run()

    def init_weight_transfer_engine(self, request):
        return self._rec("init_weight_transfer_engine", request)

    def start_weight_update(self):
        return self._rec("start_weight_update")

    def update_weights(self, request):
        return self._rec("update_weights", request)

    def finish_weight_update(self, weight_version=None):
        return self._rec("finish_weight_update", weight_version)


@pytest.mark.vllm
def test_loop_client_drives_asyncllm_methods_on_its_loop():
    pytest.importorskip("vllm", reason="runs in .venv-vllm")
    from scalerl.trainer.engines.vllm_nccl import LoopClient
    from vllm.distributed.weight_transfer import VLLMWeightSyncClient
    from vllm.distributed.weight_transfer.base import WeightTransferInitRequest, WeightTransferUpdateRequest
    from vllm.v1.engine.async_llm import AsyncLLM

    for name in (
        "init_weight_transfer_engine",
        "start_weight_update",
        "update_weights",
        "finish_weight_update",
    ):
        real, ours = (
            inspect.signature(getattr(AsyncLLM, name)),
            inspect.signature(getattr(_RecordingLLM, name)),
        )
        assert inspect.iscoroutinefunction(getattr(AsyncLLM, name))
        assert list(real.parameters) == list(ours.parameters), name
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="engine-loop", daemon=True)
    thread.start()
    try:
        llm = _RecordingLLM()
        client = LoopClient(llm, loop)
        assert isinstance(client, VLLMWeightSyncClient)
        client.init_weight_transfer_engine({"world_size": 2})
        client.start_weight_update()
        client.update_weights({"names": ["a"]})
        client.finish_weight_update()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
    names = [c[0] for c in llm.calls]
    assert names == [
        "init_weight_transfer_engine",
        "start_weight_update",
        "update_weights",
        "finish_weight_update",
    ]
    assert {c[2] for c in llm.calls} == {"engine-loop"}
    init, update = llm.calls[0][1], llm.calls[2][1]
    assert isinstance(init, WeightTransferInitRequest) and init.init_info == {"world_size": 2}
    assert isinstance(update, WeightTransferUpdateRequest) and update.update_info == {"names": ["a"]}
