"""Tiny models built from configs for the trainer tests (no downloads)."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def tiny_llama(*, tied=True, vocab=96, seed=0):
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=128,
        tie_word_embeddings=tied,
    )
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():  # sharper distributions than the 0.02 init, like a trained model's
        model.get_output_embeddings().weight.mul_(20)
    return model
