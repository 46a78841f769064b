"""Generation-engine settings (`engine` in `TrainConfig`) and `EngineSpec`, what building an engine reads
from a run's configuration; config only, no torch or vLLM import."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from scalerl.env.contracts.records import Strict
from scalerl.trainer.core.lora_config import LoraConfig, pushes_adapters
from scalerl.trainer.tiny.tiny_config import TinyModelConfig


class VLLMOptions(Strict):
    """vLLM-only settings (`engine.vllm` in `TrainConfig`); dtype, FP32 head, seed and the KV-cache budget
    (`engine.kv_cache_gib`) come from the engine section."""

    GONE = {"kv_cache_gib": "use engine.kv_cache_gib (one KV-cache budget for either engine)"}

    gpu_memory_utilization: float = Field(default=0.85, gt=0, le=1, description="GPU only")
    tensor_parallel_size: int = Field(default=1, ge=1)
    enforce_eager: bool = Field(default=True, description="skip graph compilation (minutes on a loaded CPU)")
    weight_transfer: Literal["file", "nccl"] = Field(
        default="file",
        description="how update_weights reaches the workers: 'file' = a .safetensors file + collective_rpc "
        "(CPU and GPU); 'nccl' = vLLM's NCCL transfer engine from this process (GPU only, needs "
        "tensor_parallel_size + 1 visible GPUs; not yet run on hardware)",
    )
    nccl_device: int | None = Field(
        default=None,
        ge=0,
        description="weight_transfer='nccl': CUDA index of the sending rank in this process; "
        "None = tensor_parallel_size (the first GPU after vLLM's workers)",
    )


class EngineConfig(Strict):
    name: Literal["torch", "vllm"] = "torch"
    device: str = Field(default="auto", description="auto (cuda when available, else cpu), cpu, cuda, cuda:N")
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    max_slots: int = Field(default=256, ge=1, description="sequences decoded together")
    max_seq_len: int = Field(default=160, ge=8, description="prompt + completion tokens per sequence")
    kv_cache_gib: float | None = Field(
        default=None, gt=0, description="KV-cache budget of each engine, either kind: the torch engine's slots = "
        "min(max_slots, what fits) (training and validation); vLLM's kv_cache_memory_bytes (on a GPU vLLM "
        "still needs engine.vllm.gpu_memory_utilization of the device free at start). None = max_slots "
        "(torch), 1 GiB (vLLM on CPU), what gpu_memory_utilization leaves (vLLM on GPU)")
    device_memory_gib: float | None = Field(
        default=None, gt=0, description="memory of each GPU for the memory plan (scalerl.trainer.memory): a run whose "
        "plan does not fit stops before loading weights; None = detected on CUDA, unchecked on CPU")
    max_new_tokens: int = Field(default=64, ge=1, description="sampled-token budget when length.mode != interrupt")
    temperature: float = Field(default=1.0, gt=0)
    vllm: VLLMOptions = Field(default_factory=VLLMOptions, description="used when name = vllm")


class EngineSpec(Strict):
    """What building a generation engine reads from a run's configuration (`TrainConfig.engine_spec()`),
    in this process or in a generator actor: the engine section, the FP32-head switch the trainer uses
    too, the LoRA section (vLLM serving adapters), and what an actor needs to rebuild the policy's
    architecture before the weights arrive (the model, the tiny model's size, torch's threads)."""

    engine: EngineConfig
    fp32_head: bool
    lora: LoraConfig
    model: str | None
    tiny: TinyModelConfig
    torch_threads: int = Field(ge=1)

    @property
    def pushes_adapters(self) -> bool:
        """Whether the weight push sends adapters (`scalerl.trainer.core.lora_config.pushes_adapters`)."""
        return pushes_adapters(self.lora, self.engine.name)
