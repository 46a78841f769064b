"""KV-cache sizes of the torch engine and the slot count a memory budget allows.

The torch engine (`scalerl.trainer.engines.torch_decoder.SlotDecoder`) preallocates, per decoder layer, a K and
a V tensor of `[slots, kv_heads, max_seq_len, head_dim]` in the engine's dtype, so its cache is exactly
`slots × max_seq_len × kv_bytes_per_token` bytes. Guaranteed: `slots_for_budget` never returns a slot
count whose cache exceeds the budget, except the floor of one slot (a single sequence must fit; the
plan then reports the overrun). Not guaranteed: the allocator's rounding or fragmentation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scalerl.trainer.engines.engine_config import EngineConfig

if TYPE_CHECKING:  # transformers is imported where a model is built, not for a type
    from transformers import PretrainedConfig

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8}


def kv_bytes_per_token(n_layers: int, kv_heads: int, head_dim: int, dtype: str) -> int:
    """Bytes of K and V of one token over all layers."""
    return 2 * n_layers * kv_heads * head_dim * DTYPE_BYTES[dtype]


def slots_for_budget(budget_bytes: float | None, max_slots: int, max_seq_len: int, per_token: int) -> int:
    """The most slots (≤ `max_slots`, ≥ 1) whose full-length cache fits `budget_bytes` (None: `max_slots`)."""
    if budget_bytes is None:
        return max_slots
    return max(1, min(max_slots, int(budget_bytes // (max_seq_len * per_token))))


def engine_slots(model_config: PretrainedConfig, engine: EngineConfig, max_slots: int | None = None) -> int:
    """Slots of a torch engine for a `transformers` config and the `engine` section: `max_slots` (default
    `engine.max_slots`) bounded by `engine.kv_cache_gib` at `engine.max_seq_len`, at least 1."""
    c, e = model_config, engine
    heads = c.num_attention_heads
    per_token = kv_bytes_per_token(c.num_hidden_layers, getattr(c, "num_key_value_heads", None) or heads,
                                   getattr(c, "head_dim", None) or c.hidden_size // heads, e.dtype)
    budget = None if e.kv_cache_gib is None else e.kv_cache_gib * (1 << 30)
    return slots_for_budget(budget, max_slots or e.max_slots, e.max_seq_len, per_token)
