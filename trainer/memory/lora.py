"""The memory plan's LoRA terms (`lora.enabled`): what `scalerl.trainer.core.lora` adds and removes on the trainer.

With adapters, AdamW holds gradients and two moments for the adapters only, so `build_plan` gets
`trainable_params` = the adapter count: r x (in + out) for every adapted projection of every decoder
layer (`q_proj`, `k_proj`, `v_proj`, `o_proj`: hidden <-> q/kv width; `gate_proj`, `up_proj`,
`down_proj`: hidden <-> intermediate; names the shape does not have count 0). Two terms are added on
rank 0's device: `lora adapters` (their fp32 weights) and `mirror` (one rank: the trainer adapts a copy,
the plain model the engine and checkpoints read stays beside it). Guaranteed: the adapter count equals
`sum(numel)` of PEFT's adapters on the `transformers` model of the same shape (tested). Not counted:
the adapters' activations (r per token per adapted layer, and a dropout copy of each input when
`lora.dropout` > 0), small next to the layer activations the plan already counts.

vLLM serving the adapters (`scalerl.trainer.core.lora_config.pushes_adapters`): its LoRA slot (`vllm_lora_slot_bytes`:
`max_loras` = 1 x `max_lora_rank` x (in + out) of every projection of each vLLM layer the targets touch,
`qkv_proj` and `gate_up_proj` whole, in the engine's dtype) is allocated inside vLLM's share
(`gpu_memory_utilization`), so it shrinks vLLM's KV cache, not the trainer's room: `lora_notes` states
it beside the plan instead of adding a term (that would count it twice). The adapter's CPU copy in
vLLM's worker (`max_cpu_loras` = 1) is host memory and not planned.
"""

from __future__ import annotations

from typing import Any

from scalerl.trainer.core.lora_config import VLLM_PACKED, LoraConfig, pushes_adapters, vllm_lora_rank
from scalerl.trainer.memory.kv import DTYPE_BYTES
from scalerl.trainer.memory.plan import PlanContext, Term
from scalerl.trainer.memory.plan_inputs import PlanInputs
from scalerl.trainer.memory.shapes import ModelShape


def projection_dims(s: ModelShape) -> dict[str, tuple[int, int]]:
    """(in, out) features of each linear projection of a decoder layer."""
    return {"q_proj": (s.hidden, s.q_dim), "k_proj": (s.hidden, s.kv_dim), "v_proj": (s.hidden, s.kv_dim),
            "o_proj": (s.q_dim, s.hidden), "gate_proj": (s.hidden, s.intermediate),
            "up_proj": (s.hidden, s.intermediate), "down_proj": (s.intermediate, s.hidden)}


def adapter_params(s: ModelShape, lora: LoraConfig) -> int:
    """Adapter parameters of the `lora` section on shape `s`."""
    targets = {t.rpartition(".")[2] for t in lora.target_modules}
    per_layer = sum(lora.rank * (i + o) for name, (i, o) in projection_dims(s).items() if name in targets)
    return s.layers * per_layer


def plan_args(shape: ModelShape, inputs: PlanInputs) -> dict[str, Any]:
    """`build_plan` keywords for `inputs`: empty without LoRA."""
    lora = inputs.lora
    if not lora.enabled:
        return {}
    n = adapter_params(shape, lora)

    def terms(ctx: PlanContext) -> list[Term]:
        dev = ctx.trainer_devices[0]
        if len(set(ctx.trainer_devices)) != len(ctx.trainer_devices):
            dev = f"{dev} (rank 0)"
        out = [Term("lora adapters", n * 4, dev, f"{n / 1e6:.2f} M adapter params x 4 B (r={lora.rank})",
                    ("lora.rank", "lora.target_modules"))]
        if len(ctx.trainer_devices) == 1:
            out.append(Term("mirror", ctx.shape.params * 4, dev, "the plain model beside the adapted copy (engine, "
                            "checkpoints)", ("ray.trainer_num_gpus with separate generator GPUs",)))
        return out

    return {"trainable_params": n, "extra_terms": [terms]}


def vllm_lora_slot_bytes(s: ModelShape, lora: LoraConfig, dtype: str) -> int:
    """Bytes of vLLM's one LoRA slot for `lora` on shape `s` (see the module docstring)."""
    layers = {VLLM_PACKED[t.rpartition(".")[2]] for t in lora.target_modules}
    dims = projection_dims(s)
    per_layer = sum(i + o for name, (i, o) in dims.items() if VLLM_PACKED[name] in layers)
    return s.layers * vllm_lora_rank(lora) * per_layer * DTYPE_BYTES[dtype]


def lora_notes(shape: ModelShape, inputs: PlanInputs) -> list[str]:
    """The plan's note on vLLM's LoRA slot when vLLM serves the adapters; none otherwise."""
    lora, dtype = inputs.lora, inputs.engine.dtype
    if not pushes_adapters(lora, inputs.engine.name):
        return []
    n = vllm_lora_slot_bytes(shape, lora, dtype)
    return [f"vLLM LoRA slot: {n / 2**20:.1f} MiB (max_lora_rank {vllm_lora_rank(lora)}, {dtype}) "
            "inside the vLLM share: it shrinks vLLM's KV cache, not the trainer's memory"]
