"""vLLM's own LoRA loading for `VLLMEngine(lora=..., adapters=...)`: one adapter, replaced in place at each push.

- Start: `engine_args()` adds `enable_lora`, `max_lora_rank` (the smallest value vLLM accepts that holds
  `lora.rank`), `max_loras=1`, `max_cpu_loras=1` and `lora_target_modules` (vLLM's packed layer names,
  `scalerl.trainer.core.lora_config.vllm_target_modules`) to vLLM's engine arguments; the engine's model folder
  holds the BASE weights (`scalerl.trainer.core.lora.base_state_dict`), the adapters come through `request`.
- `write(adapters)`: the adapter tensors under `scalerl.trainer.core.lora.adapter_state_dict` names, checked
  against the first ones (same names and shapes), written as a PEFT folder (`write_peft_adapter`).
- Every request carries `request` (`LoRARequest(NAME, ID, folder)`); an update re-adds the same id with
  `load_inplace=True` while generation is paused (`VLLMEngine._update`), so running requests continue on
  their KV cache with the new adapter and the per-token versions stay those of `update_weight_version`.

Why one id replaced in place and not a new id per policy version: a vLLM request keeps the
`LoRARequest` it was submitted with, so a new id would freeze every running request on its old adapter
(no in-flight update, versions per request instead of per token), and its old adapter could only be
removed once the last such request ended. With one id the memory vLLM holds for adapters is one slot
(GPU: `max_lora_rank` x (in + out) per adapted layer, `scalerl.trainer.memory.lora.vllm_lora_slot_bytes`) plus
one CPU copy, whatever the number of pushes.
Not guaranteed: adapters on anything but the attention and MLP projections (refused), several adapters.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scalerl.trainer.core.lora import write_peft_adapter
from scalerl.trainer.core.lora_config import LoraConfig, vllm_lora_rank, vllm_target_modules

NAME, ID = "scalerl-policy", 1


class VLLMAdapter:
    """The adapter folder and the `LoRARequest` of one vLLM engine (see the module docstring)."""

    def __init__(self, folder: str | Path, lora: LoraConfig, adapters: Mapping[str, Any]) -> None:
        if not adapters:
            raise ValueError("a vLLM engine with lora needs the initial adapters (adapter_state_dict of the policy)")
        self.lora, self.folder = lora, Path(folder)
        self.max_lora_rank, self.targets = vllm_lora_rank(lora), vllm_target_modules(lora)
        self.shapes = {k: tuple(v.shape) for k, v in adapters.items()}
        write_peft_adapter(self.folder, adapters, lora)

    def engine_args(self) -> dict[str, Any]:
        return {"enable_lora": True, "max_lora_rank": self.max_lora_rank, "max_loras": 1, "max_cpu_loras": 1,
                "lora_target_modules": self.targets}

    def request(self, *, load_inplace: bool = False) -> Any:
        """The request every generation carries; `load_inplace=True` only for the update itself (a request
        carrying it would reload the adapter at every scheduler step)."""
        from vllm.lora.request import LoRARequest

        return LoRARequest(NAME, ID, str(self.folder), load_inplace=load_inplace)

    def write(self, adapters: Mapping[str, Any]) -> None:
        """Check `adapters` against the first ones, then replace the folder's weights (before the reload)."""
        missing = sorted(set(self.shapes) - set(adapters))
        unexpected = sorted(set(adapters) - set(self.shapes))
        wrong = [f"{k}: {tuple(adapters[k].shape)} != {s}" for k, s in self.shapes.items()
                 if k in adapters and tuple(adapters[k].shape) != s]
        if missing or unexpected or wrong:
            raise ValueError(f"adapters do not match the engine's (expected adapter_state_dict names): missing "
                             f"{missing[:5]}, unexpected {unexpected[:5]}, wrong shapes {wrong[:5]}")
        write_peft_adapter(self.folder, adapters, self.lora)
