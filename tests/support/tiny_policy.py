"""Built-in tiny models with known behaviour, and a small training config for contract tests.

`scripted_tiny_model(text)` is `scalerl.trainer.tiny.model.build_tiny_model` with its weights set so that, after
any prompt of the tiny format (which ends with the answer marker's space), it emits exactly `text`
then eos, with probability ~1 even at temperature 1: attention and MLP outputs are zero, so the
residual stream at a position is the embedding of its token, a one-hot vector; the LM head maps each
token to its successor in `text` (a bigram chain). `text` must not repeat a character or contain a
space.
"""

from __future__ import annotations

from typing import Any

import torch
from scalerl.env.contracts.config_loader import load_config
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.tiny.model import ANSWER_MARKER, CharTokenizer, build_tiny_model
from scalerl.trainer.tiny.tiny_config import TinyModelConfig

SMALL_MODEL = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=1, head_dim=32, intermediate_size=32)


def small_train_config(*overrides: str) -> TrainConfig:
    """The default config, on the CPU, with short completions and few held-out evaluations."""
    return load_config(TrainConfig, None, ["engine.device=cpu", "length.mode=none", "engine.max_new_tokens=12",
                                           "validation.min_evaluations_per_domain=4", *overrides])


def scripted_tiny_model(text: str, *, logit: float = 10.0) -> Any:
    tok = CharTokenizer()
    last = ANSWER_MARKER[-1]
    if len(set(text)) != len(text) or last in text:
        raise ValueError("a scripted answer cannot repeat a character or contain the marker's last character")
    model = build_tiny_model(TinyModelConfig(), tok)  # hidden 128 >= vocabulary 101: one-hot embeddings fit
    hidden = model.config.hidden_size
    vocab = tok.vocab_size
    assert vocab <= hidden
    chain = [tok.vocab[last], *tok.encode(text), tok.eos_token_id]
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                p.zero_()
        model.model.embed_tokens.weight.zero_()
        model.model.embed_tokens.weight[:, :vocab] = torch.eye(vocab)
        model.model.norm.weight.fill_(1.0)
        head = torch.zeros(vocab, hidden)
        head[tok.eos_token_id, :vocab] = logit  # every token is followed by eos ...
        for a, b in zip(chain, chain[1:]):  # ... except along the chain
            head[:, a] = 0.0
            head[b, a] = logit
        model.lm_head.weight.copy_(head)
    return model
