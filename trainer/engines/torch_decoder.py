"""A functional Llama/Qwen2-style decoder over a slot KV cache, the compute core of the torch engine.

It reads the weights of a `transformers` causal LM by their Hugging Face names (Llama, Mistral, Qwen2:
RMSNorm, rotary embeddings from the model's own rotary module, grouped-query attention, SwiGLU MLP,
optional q/k/v biases) and keeps its own copy, so a trainer may step its model while this decoder
samples. The cache is compact: active sequences occupy slots 0..n-1, so decoding runs on views
of the cache without gathering.

Guarantees: for the same weights, the logits equal the `transformers` forward of the same tokens
(fp32: within float rounding, tested). With `fp32_head` the final norm output and the LM head are
computed in float32 whatever the body's dtype (ScaleRL's FP32 head on the generator side).

Not guaranteed: other architectures (sliding windows, MoE, attention soft-capping) are rejected at
construction, never silently run wrong.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

SUPPORTED = {"llama", "mistral", "qwen2"}


class SlotDecoder:
    def __init__(self, model: Any, *, device: str | torch.device, dtype: torch.dtype | None,
                 max_slots: int, max_seq_len: int, fp32_head: bool = True) -> None:
        cfg = model.config
        if cfg.model_type not in SUPPORTED:
            raise ValueError(f"torch engine supports {sorted(SUPPORTED)}, not model_type={cfg.model_type!r}")
        if getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", True) \
                and cfg.model_type != "llama":
            raise ValueError("sliding-window attention is not supported by the torch engine")
        self.device = torch.device(device)
        self.dtype = dtype or next(model.parameters()).dtype
        self.fp32_head = fp32_head
        self.n_layers = cfg.num_hidden_layers
        self.n_heads = cfg.num_attention_heads
        self.n_kv = getattr(cfg, "num_key_value_heads", None) or self.n_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.n_heads
        self.eps = cfg.rms_norm_eps
        self.tied = bool(getattr(cfg, "tie_word_embeddings", False))
        self.rotary = copy.deepcopy(model.model.rotary_emb).to(self.device)
        self.params: dict[str, torch.Tensor] = {
            k: v.detach().to(self.device, self.dtype).clone() for k, v in model.state_dict().items()
            if not k.endswith("rotary_emb.inv_freq")
        }
        if self.tied or "lm_head.weight" not in self.params:
            self.params["lm_head.weight"] = self.params["model.embed_tokens.weight"]
        self.max_slots, self.max_seq_len = max_slots, max_seq_len
        shape = (max_slots, self.n_kv, max_seq_len, self.head_dim)
        self.k = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(self.n_layers)]
        self.v = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(self.n_layers)]

    # ------------------------------------------------------------------------------------- weights
    def check_weights(self, weights: Mapping[str, Any]) -> None:
        """Raise before touching anything if a name or shape does not match (all-or-nothing update)."""
        for name, t in weights.items():
            if name not in self.params:
                raise KeyError(f"update_weights: unknown parameter {name!r}")
            if tuple(t.shape) != tuple(self.params[name].shape):
                raise ValueError(f"update_weights: {name} has shape {tuple(t.shape)}, "
                                 f"expected {tuple(self.params[name].shape)}")

    @torch.no_grad()
    def load_weights(self, weights: Mapping[str, Any]) -> None:
        self.check_weights(weights)
        for name, t in weights.items():
            self.params[name].copy_(t.detach().to(self.device, self.dtype))

    # ------------------------------------------------------------------------------------- forward
    def _norm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return w * xf.to(x.dtype)

    def _proj(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, self.params[name + ".weight"], self.params.get(name + ".bias"))

    @staticmethod
    def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rot * sin

    @torch.no_grad()
    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor,
                key_len: int, mask: torch.Tensor) -> torch.Tensor:
        """Run `tokens` [B, T] at `positions` [B, T], writing K/V into cache `slots` [B].

        Keys are cache positions [0, key_len) of `slots`; `mask` [B, T, key_len] (True = attend).
        Returns fp32 (or body-dtype) logits [B, T, V]."""
        p = self.params
        h = F.embedding(tokens, p["model.embed_tokens.weight"])
        cos, sin = self.rotary(h, positions)
        cos, sin = cos.unsqueeze(1).to(h.dtype), sin.unsqueeze(1).to(h.dtype)
        b, t = tokens.shape
        rows = slots[:, None].expand(b, t)
        contiguous = bool((slots == torch.arange(b, device=slots.device)).all())
        attn_mask = mask[:, None]
        for i in range(self.n_layers):
            pre = f"model.layers.{i}."
            x = self._norm(h, p[pre + "input_layernorm.weight"])
            q = self._proj(x, pre + "self_attn.q_proj").view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
            k = self._proj(x, pre + "self_attn.k_proj").view(b, t, self.n_kv, self.head_dim).transpose(1, 2)
            v = self._proj(x, pre + "self_attn.v_proj").view(b, t, self.n_kv, self.head_dim).transpose(1, 2)
            q, k = self._rope(q, cos, sin), self._rope(k, cos, sin)
            # cache[l][slot, head, pos] = k[b, head, t]
            self.k[i][rows, :, positions] = k.transpose(1, 2)
            self.v[i][rows, :, positions] = v.transpose(1, 2)
            if contiguous:
                keys, vals = self.k[i][:b, :, :key_len], self.v[i][:b, :, :key_len]
            else:
                keys, vals = self.k[i][slots, :, :key_len], self.v[i][slots, :, :key_len]
            o = F.scaled_dot_product_attention(q, keys, vals, attn_mask=attn_mask,
                                               enable_gqa=self.n_kv != self.n_heads)
            h = h + self._proj(o.transpose(1, 2).reshape(b, t, -1), pre + "self_attn.o_proj")
            x = self._norm(h, p[pre + "post_attention_layernorm.weight"])
            gate = self._proj(x, pre + "mlp.gate_proj")
            h = h + self._proj(F.silu(gate) * self._proj(x, pre + "mlp.up_proj"), pre + "mlp.down_proj")
        return self.head(h)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        w_norm, w_head = self.params["model.norm.weight"], self.params["lm_head.weight"]
        if self.fp32_head:
            return F.linear(self._norm(h.float(), w_norm.float()), w_head.float())
        return F.linear(self._norm(h, w_norm), w_head)

    @torch.no_grad()
    def copy_slots(self, src: Any, dst: Any, length: int) -> None:
        """Copy the first `length` cache positions of slots `src` into `dst` (shared prompts, compaction)."""
        for i in range(self.n_layers):
            self.k[i][dst, :, :length] = self.k[i][src, :, :length]
            self.v[i][dst, :, :length] = self.v[i][src, :, :length]
