"""Token log-probabilities of packed sequences through an FP32 LM head (ScaleRL "FP32 precision at
the LM head", after MiniMax-M1).

    h = last hidden states of the decoder (model dtype)          [T, d]
    z = (h.float() @ W.float()ᵀ + b.float()) / temperature       [T, V]   fp32, autocast disabled
    logprobs[t] = log_softmax(z[t − 1])[input_ids[t]]            fp32 (float64 for a float64 model)

Alignment: `logprobs[t]` is the log-probability of token t given the tokens before it *in its own
sequence*, so it lines up with the sampler's per-token logprob of the same token. The first token of
each packed sequence has no context and gets 0 (it is always a prompt token, loss-masked).

Packing: sequences are concatenated into one row with `position_ids` restarting at 0 for each;
Hugging Face models detect the restarts and attend block-diagonally (sdpa/eager/flex build a packed
causal mask; flash-attention uses the positions for var-len kernels). So a token sees exactly what it
saw when sampled: no padding, the sampler's positions, and the ratio stays 1 on-policy.

The model's stored dtype is never changed: W (the output embedding, tied to the input embedding or
not) is upcast on the fly inside the matmul, so bf16 weights stay bf16 and gradients flow back into
them in their own dtype. `fp32_head=False` is the ablation: the head matmul runs in the model's
dtype (and under autocast, if active), then log-softmax in fp32 as Hugging Face's own loss does.

Non-guarantees: the [T, V] fp32 logits are materialised (micro-batch by tokens to bound them); models whose decoder is not `getattr(model, model.base_model_prefix)` are not supported.
"""

from __future__ import annotations

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


def token_logprobs(
    model: nn.Module,
    input_ids: Tensor,
    position_ids: Tensor | None = None,
    *,
    cu_seqlens: Tensor | None = None,
    temperature: float = 1.0,
    fp32_head: bool = True,
) -> Tensor:
    """Per-token logprobs `[T]` (fp32, or float64 for a float64 model) of a packed row `input_ids [T]`; see the module docstring.

    Give the sequence boundaries as `position_ids [T]` (restarting at 0) or as `cu_seqlens [S+1]`;
    when both are given they must agree. With neither, the row is one sequence.
    """
    if input_ids.ndim != 1:
        raise ValueError(f"input_ids must be a packed 1-D row, got shape {tuple(input_ids.shape)}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    n = input_ids.shape[0]
    if cu_seqlens is not None:
        derived = positions_from_boundaries(cu_seqlens.to(input_ids.device))
        if position_ids is not None and not torch.equal(position_ids.to(derived.device), derived):
            raise ValueError("position_ids and cu_seqlens describe different sequence boundaries")
        position_ids = derived
    elif position_ids is None:
        position_ids = torch.arange(n, device=input_ids.device)
    _check_restarts(position_ids)
    decoder, head = _decoder_and_head(model)
    out = decoder(
        input_ids=input_ids[None], position_ids=position_ids[None].to(input_ids.device), use_cache=False
    )
    hidden = out.last_hidden_state[0, :-1]
    logits = head_logits(hidden, head, temperature=temperature, fp32_head=fp32_head)
    targets = input_ids[1:]
    picked = logits.gather(-1, targets[:, None])[:, 0] - torch.logsumexp(logits, dim=-1)
    # Token t's logprob comes from position t-1; a sequence start (position 0) has no context.
    starts = position_ids[1:] == 0
    picked = torch.where(starts.to(picked.device), torch.zeros_like(picked), picked)
    return torch.cat([picked.new_zeros(1), picked])
