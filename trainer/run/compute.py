"""Consumed compute on the axes a run's budget and its fits can use: device-seconds, samples, tokens, FLOPs.

- `device_s`: each step's wall time times the devices in use (a device that waits is still held, as in
  the paper's GPU-hours); validation and checkpoints are not counted. It follows the machine's load.
- `samples`: samples the trainer took (every sample of every group a step took, zero-variance groups
  included). `tokens`: the generated (completion) tokens of those samples. Both are fixed by what the
  run consumed, not by how fast the machine was, so runs stopped at one budget are comparable on a
  shared machine to within one step.
- `flops`: generation and training counted apart (`gen_flops`, `train_flops`). A forward pass over a
  sequence costs 2·N per token (N: parameters in matrix multiplies, the input embedding left out) plus
  attention, 4·L·d per token per attended key (QKᵀ and AV, 2 FLOPs per multiply-add; L layers, d the
  attention width), causal: the token at position t attends t keys. Generation of a sample is one
  forward over prompt + completion (a KV cache computes every position once); training is 3x the
  forward (backward = 2x) over the samples the step trained on.
`busy_s` (generator busy + trainer busy seconds) is kept beside them for comparison.

Not counted: samples generated but never taken (in flight when the run stops), the FLOPs of
elementwise ops, norms and the softmax, and recomputation under activation checkpointing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, get_args

from scalerl.trainer.config.train import ComputeAxis

AXES: tuple[str, ...] = get_args(ComputeAxis)
COUNTERS = ("device_s", "busy_s", "samples", "tokens", "gen_flops", "train_flops", "flops")
"""What a checkpoint keeps (`ComputeClock.state`) and a resumed run restores."""


@dataclass(frozen=True)
class FlopModel:
    """The FLOPs of one forward pass of a decoder, from its matmul parameters and attention shape."""

    matmul_params: int
    layers: int = 0
    attention_dim: int = 0

    @classmethod
    def of(cls, model: Any) -> FlopModel:
        """From a Hugging Face causal LM (`config.num_hidden_layers`, heads x head_dim)."""
        embedding = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
        skip = {id(p) for p in embedding.parameters()} if embedding is not None else set()
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        tied = head is not None and embedding is not None and head.weight is embedding.weight
        params = sum(p.numel() for p in model.parameters() if id(p) not in skip and p.dim() >= 2)
        params += head.weight.numel() if tied else 0  # a tied head still multiplies
        c = getattr(model, "config", None)
        layers = int(getattr(c, "num_hidden_layers", 0) or 0)
        heads = int(getattr(c, "num_attention_heads", 0) or 0)
        head_dim = getattr(c, "head_dim", None) or (int(getattr(c, "hidden_size", 0) or 0) // max(1, heads))
        return cls(params, layers, heads * int(head_dim))

    def forward(self, tokens: int, *, causal: bool = True) -> float:
        """FLOPs of one forward over a sequence of `tokens` (causal: position t attends t keys)."""
        keys = tokens * (tokens + 1) / 2 if causal else float(tokens * tokens)
        return 2.0 * self.matmul_params * tokens + 4.0 * self.layers * self.attention_dim * keys


class ComputeClock:
    """The run's counters on every axis; `spent(axis)` is what a budget on that axis compares with."""

    def __init__(self, flop_model: FlopModel, **state: float) -> None:
        self.flop_model = flop_model
        self.device_s = float(state.get("device_s", 0.0))
        self.busy_s = float(state.get("busy_s", 0.0))
        self.samples = float(state.get("samples", 0.0))
        self.tokens = float(state.get("tokens", 0.0))
        self.gen_flops = float(state.get("gen_flops", state.get("flops", 0.0)))  # older checkpoints: one total
        self.train_flops = float(state.get("train_flops", 0.0))
        self._gen_busy_seen = 0.0

    @property
    def flops(self) -> float:
        return self.gen_flops + self.train_flops

    def spent(self, axis: str) -> float:
        return float(getattr(self, axis))

    def add_wall(self, seconds: float, devices: float) -> None:
        self.device_s += seconds * devices

    def add_taken(self, sequences: Iterable[tuple[int, int]]) -> None:
        """Samples a step took, as (prompt tokens, completion tokens): samples, tokens, generation FLOPs."""
        for prompt, completion in sequences:
            self.samples += 1
            self.tokens += completion
            self.gen_flops += self.flop_model.forward(prompt + completion)

    def add_training(self, seconds: float, sequences: Iterable[tuple[int, int]] = ()) -> None:
        """One optimizer step over `sequences` (prompt, completion tokens) that took `seconds`."""
        self.busy_s += seconds
        self.train_flops += sum(3.0 * self.flop_model.forward(p + c) for p, c in sequences)

    def add_generation_busy(self, busy_s_total: float) -> None:
        """Engine busy seconds are cumulative for the life of the engine; add what is new since last call."""
        self.busy_s += max(0.0, busy_s_total - self._gen_busy_seen)
        self._gen_busy_seen = busy_s_total

    def state(self) -> dict[str, float]:
        return {"device_s": self.device_s, "busy_s": self.busy_s, "samples": self.samples, "tokens": self.tokens,
                "gen_flops": self.gen_flops, "train_flops": self.train_flops, "flops": self.flops}

    def metrics(self) -> dict[str, float]:
        """The `compute_*` keys of metrics.jsonl."""
        return {f"compute_{k}": v for k, v in self.state().items()}
