"""A model's shape from its Hugging Face `config.json` alone: no weights, no `transformers` import.

Guaranteed for the decoder families the torch engine runs (Llama, Mistral, Qwen2: GQA attention,
SwiGLU MLP, RMSNorm, optional q/k/v biases as Qwen2 has, tied or untied embeddings): the parameter
count equals `sum(p.numel())` of the `transformers` model built from the same file (tested on the
shapes in `datasets/model_shapes/`). Not guaranteed: other architectures (MoE, sliding-window
variants) — `ModelShape.from_dict` rejects a `model_type` it does not know.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KNOWN = {"llama", "mistral", "qwen2"}


@dataclass(frozen=True)
class ModelShape:
    model_type: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    qkv_bias: bool

    @classmethod
    def from_dict(cls, c: dict[str, Any]) -> ModelShape:
        mtype = c.get("model_type", "")
        if mtype not in KNOWN:
            raise ValueError(f"memory plan: model_type {mtype!r} is not one of {sorted(KNOWN)}")
        heads = int(c["num_attention_heads"])
        return cls(model_type=mtype, hidden=int(c["hidden_size"]), intermediate=int(c["intermediate_size"]),
                   layers=int(c["num_hidden_layers"]), heads=heads,
                   kv_heads=int(c.get("num_key_value_heads") or heads),
                   head_dim=int(c.get("head_dim") or int(c["hidden_size"]) // heads), vocab=int(c["vocab_size"]),
                   tied=bool(c.get("tie_word_embeddings", False)),
                   qkv_bias=mtype == "qwen2" or bool(c.get("attention_bias", False)))

    @classmethod
    def from_folder(cls, folder: str | Path) -> ModelShape:
        """The shape of `folder/config.json` (a file path to a config.json works too)."""
        path = Path(folder)
        path = path if path.is_file() else path / "config.json"
        return cls.from_dict(json.loads(path.read_text()))

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def layer_params(self) -> int:
        d = self.hidden
        attn = d * self.q_dim + 2 * d * self.kv_dim + self.q_dim * d
        bias = (self.q_dim + 2 * self.kv_dim) if self.qkv_bias else 0
        return attn + bias + 3 * d * self.intermediate + 2 * d

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def params(self) -> int:
        head = 0 if self.tied else self.embedding_params
        return self.layers * self.layer_params + self.embedding_params + head + self.hidden

    def with_layers(self, layers: int) -> ModelShape:
        """The same shape with another layer count (the fake-tensor checks use fewer layers)."""
        return ModelShape(**{**self.__dict__, "layers": layers})
