"""Token log-probabilities of packed sequences through an FP32 LM head (ScaleRL "FP32 precision at
the LM head", after MiniMax-M1).

    h = last hidden states of the decoder (model dtype)          [T, d]
    z = (h.float() @ W.float()ᵀ + b.float()) / temperature       [T, V]   fp32, autocast disabled
    logprobs[t] = log_softmax(z[t − 1])[input_ids[t]]            fp32 (float64 for a float64 model)

Alignment: `logprobs[t]` is the log-probability of token t given the tokens before it *in its own
sequence*, so it lines up with the sampler's per-token logprob of the same token. The first token of
each packed sequence has no context and gets 0 (it is always a prompt token, loss-masked).

Packing: sequences are concatenated into one row with `position_ids` restarting at 0 for each. The
decoder sees them in one of two layouts, with the same result up to float rounding:
- `packed`: the row as is; Hugging Face detects the restarts and attends block-diagonally
  (flash-attention: var-len kernels, linear in T; sdpa/eager: a dense T × T block-diagonal mask);
- `padded`: one right-padded row per sequence with a 2-D attention mask (S × L², much cheaper than
  T² for sdpa/eager: measured 2.5–3.5× faster forward+backward for 64 sequences of ~40 tokens on CPU).
`auto` picks packed for flash-attention, padded otherwise. Either way a token sees exactly its own
sequence at the sampler's positions, so the ratio stays 1 on-policy.

The model's stored dtype is never changed: W (the output embedding, tied to the input embedding or
not) is upcast on the fly inside the matmul, so bf16 weights stay bf16 and gradients flow back into
them in their own dtype. `fp32_head=False` is the ablation: the head matmul runs in the model's
dtype (and under autocast, if active), then log-softmax in fp32 as Hugging Face's own loss does.

Non-guarantees: the [T, V] fp32 logits are materialised (micro-batch by tokens to bound them);
models whose decoder is not `getattr(model, model.base_model_prefix)` are not supported.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn


def _decoder_and_head(model: nn.Module) -> tuple[nn.Module, nn.Module]:
    prefix = getattr(model, "base_model_prefix", "model")
    decoder = getattr(model, prefix, None)
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if decoder is None or head is None:
        raise TypeError(
            f"{type(model).__name__} is not a Hugging Face causal LM with a decoder and an LM head"
        )
    return decoder, head


def positions_from_boundaries(cu_seqlens: Tensor) -> Tensor:
    """Position ids restarting at 0 at every sequence start; `cu_seqlens` = [0, len0, len0+len1, ...]."""
    lengths = cu_seqlens[1:] - cu_seqlens[:-1]
    if (lengths <= 0).any():
        raise ValueError("every packed sequence needs at least one token")
    starts = torch.repeat_interleave(cu_seqlens[:-1], lengths)
    return torch.arange(int(cu_seqlens[-1]), device=cu_seqlens.device) - starts


def head_logits(hidden: Tensor, head: nn.Module, *, temperature: float, fp32_head: bool) -> Tensor:
    """Logits of the LM head, fp32 (autocast off) or in the model's dtype (the ablation), temperature applied."""
    bias = getattr(head, "bias", None)
    # At least fp32: a float64 model (used for exactness tests) keeps float64.
    wide = torch.promote_types(head.weight.dtype, torch.float32)
    if fp32_head:
        with torch.autocast(device_type=hidden.device.type, enabled=False):
            logits = hidden.to(wide) @ head.weight.to(wide).T
            if bias is not None:
                logits = logits + bias.to(wide)
    else:
        logits = head(hidden).to(wide)
    return logits / temperature if temperature != 1.0 else logits


def _check_restarts(position_ids: Tensor) -> None:
    if position_ids.numel() == 0:
        raise ValueError("token_logprobs needs at least one token")
    breaks = torch.diff(position_ids) != 1
    if int(position_ids[0]) != 0 or bool((position_ids[1:][breaks] != 0).any()):
        raise ValueError("position_ids must count 0, 1, 2, ... within each packed sequence")


Layout = Literal["auto", "packed", "padded"]


def resolve_layout(model: nn.Module, layout: Layout) -> Literal["packed", "padded"]:
    """`auto`: packed for flash-attention kernels (var-len, linear in T), padded otherwise."""
    if layout != "auto":
        return layout
    impl = str(getattr(getattr(model, "config", None), "_attn_implementation", "") or "")
    return "packed" if impl.startswith("flash") else "padded"


def decoder_hidden(decoder: nn.Module, input_ids: Tensor, position_ids: Tensor, layout: str) -> Tensor:
    """Last hidden states `[T, d]` of the packed row, computed packed or per-sequence padded.

    Both honour the sequence boundaries; `use_cache=False` matters: with a KV cache, Hugging Face
    skips its packed-sequence detection and would attend across sequences."""
    if layout == "packed":
        return decoder(
            input_ids=input_ids[None], position_ids=position_ids[None], use_cache=False
        ).last_hidden_state[0]
    ids, pos, mask = pad_sequences(input_ids, position_ids)
    out = decoder(input_ids=ids, attention_mask=mask.long(), position_ids=pos, use_cache=False)
    return out.last_hidden_state[mask]


def pad_sequences(input_ids: Tensor, position_ids: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The packed row as right-padded `[S, L]` ids, positions and a bool mask (`x[mask]` = packed order)."""
    starts = torch.nonzero(position_ids == 0)[:, 0]
    lengths = torch.diff(starts, append=starts.new_tensor([position_ids.numel()]))
    mask = torch.arange(int(lengths.max()), device=input_ids.device)[None, :] < lengths[:, None]
    # Right padding: pad queries still see their own sequence's tokens, so no row is fully masked.
    ids = input_ids.new_zeros(mask.shape).masked_scatter(mask, input_ids)
    pos = position_ids.new_zeros(mask.shape).masked_scatter(mask, position_ids)
    return ids, pos, mask


def token_logprobs(
    model: nn.Module,
    input_ids: Tensor,
    position_ids: Tensor | None = None,
    *,
    cu_seqlens: Tensor | None = None,
    temperature: float = 1.0,
    fp32_head: bool = True,
    layout: Layout = "auto",
) -> Tensor:
    """Per-token logprobs `[T]` (fp32, float64 for a float64 model) of a packed row `input_ids [T]`.

    Give the sequence boundaries as `position_ids [T]` (restarting at 0) or as `cu_seqlens [S+1]`;
    when both are given they must agree. With neither, the row is one sequence. `layout` chooses how
    the decoder sees the sequences (see the module docstring); the result is the same up to float
    rounding.
    """
    if input_ids.ndim != 1:
        raise ValueError(f"input_ids must be a packed 1-D row, got shape {tuple(input_ids.shape)}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if cu_seqlens is not None:
        derived = positions_from_boundaries(cu_seqlens.to(input_ids.device))
        if position_ids is not None and not torch.equal(position_ids.to(derived.device), derived):
            raise ValueError("position_ids and cu_seqlens describe different sequence boundaries")
        position_ids = derived
    elif position_ids is None:
        position_ids = torch.arange(input_ids.shape[0], device=input_ids.device)
    position_ids = position_ids.to(input_ids.device)
    _check_restarts(position_ids)
    decoder, head = _decoder_and_head(model)
    hidden = decoder_hidden(decoder, input_ids, position_ids, resolve_layout(model, layout))[:-1]
    logits = head_logits(hidden, head, temperature=temperature, fp32_head=fp32_head)
    picked = logits.gather(-1, input_ids[1:, None])[:, 0] - torch.logsumexp(logits, dim=-1)
    # Token t's logprob comes from position t-1; a sequence start (position 0) has no context.
    picked = torch.where(position_ids[1:] == 0, torch.zeros_like(picked), picked)
    return torch.cat([picked.new_zeros(1), picked])


class TokenLogprobs(nn.Module):
    """`token_logprobs` of `policy` as a module's `forward`, so a wrapper that shards or replicates the
    root module (FSDP2, DDP) sees the decoder and the LM head used inside its own forward.

    Calling the decoder and `lm_head.weight` directly from outside (as `token_logprobs` does) bypasses
    the root: under FSDP2 the head weight is still a shard (mixed Tensor/DTensor error), under DDP the
    gradient all-reduce is skipped. State-dict keys carry the prefix `policy.`."""

    def __init__(self, policy: nn.Module, *, temperature: float = 1.0, fp32_head: bool = True,
                 layout: Layout = "auto") -> None:
        super().__init__()
        self.policy = policy
        self.temperature, self.fp32_head, self.layout = temperature, fp32_head, layout

    def forward(self, input_ids: Tensor, position_ids: Tensor) -> Tensor:
        return token_logprobs(self.policy, input_ids, position_ids, temperature=self.temperature,
                              fp32_head=self.fp32_head, layout=self.layout)
