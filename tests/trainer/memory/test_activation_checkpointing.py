"""`optim.activation_checkpointing`: the same gradients as without it (each layer recomputed in backward)."""

from __future__ import annotations

import torch
from scalerl.env.contracts.config_loader import load_config
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.core.update import PolicyTrainer, pack_samples
from scalerl.trainer.distributed.sharding import cut_batch
from scalerl.trainer.tiny.model import CharTokenizer, build_tiny_model

from tests.support.tiny_policy import SMALL_MODEL


def grads(checkpointing: bool) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = build_tiny_model(SMALL_MODEL.model_copy(update={"num_layers": 2}), CharTokenizer())
    cfg = load_config(TrainConfig, None, [f"optim.activation_checkpointing={str(checkpointing).lower()}"])
    trainer = PolicyTrainer(model, cfg.optim, cfg.loss)
    assert model.is_gradient_checkpointing == checkpointing
    batch = pack_samples([[1, 2, 3], [4, 5]], [[6, 7], [8, 9, 10]], [[-1.0, -2.0], [-1.0, -1.5, -2.0]],
                         [[1, 1], [1, 1, 1]], [1.0, -1.0], [0, 0])
    trainer.accumulate_shard(cut_batch(batch, cfg.loss.aggregation, 1, cfg.optim.micro_batch_tokens)[0])
    return [p.grad.clone() for p in model.parameters() if p.grad is not None]


def test_checkpointing_keeps_the_gradients():
    plain, recomputed = grads(False), grads(True)
    assert len(plain) == len(recomputed) > 0
    for a, b in zip(plain, recomputed, strict=True):
        torch.testing.assert_close(a, b)
