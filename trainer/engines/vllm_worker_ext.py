"""Worker extension mixed into vLLM's worker (`worker_extension_cls`): in-place weight reload.

The trainer's weights reach the worker as a path to a `.safetensors` file on the worker's machine
(written atomically by `VLLMEngine.update_weights`). `collective_rpc` cannot carry torch tensors into
the multi-process engine (they arrive as lists), and plain `model.load_weights` fails on the CPU
backend (it prepacks linear weights); the worker's own `reload_weights(..., is_checkpoint_format=True)`
works on CPU and GPU and takes Hugging Face names and shapes.

Guarantee: this module imports nothing heavy at import time (it is imported in every worker process).
Non-guarantee: a reload that fails half-way leaves the model unusable (vLLM leaves meta tensors);
the engine validates names and shapes before it calls this.
"""

from __future__ import annotations


class WeightReloadExtension:
    """Methods called by name through `AsyncLLM.collective_rpc`; `self` is the vLLM worker."""

    def scalerl_reload_weights(self, path: str) -> int:
        """Load the tensors of `path` (HF checkpoint names) into the running model; returns their count."""
        from safetensors.torch import load_file

        tensors = load_file(path)
        self.reload_weights(weights_iterator=list(tensors.items()), is_checkpoint_format=True)
        return len(tensors)

    def scalerl_lora_slot_bytes(self) -> int:
        """Bytes of the LoRA buffers vLLM allocated (`lora_a_stacked` / `lora_b_stacked` of every layer):
        what `scalerl.trainer.memory.lora.vllm_lora_slot_bytes` plans; 0 without `enable_lora`."""
        total = 0
        for module in self.model_runner.model.modules():
            for name in ("lora_a_stacked", "lora_b_stacked"):
                for t in getattr(module, name, None) or ():
                    total += t.numel() * t.element_size()
        return total
