"""Checkpoints: HF safetensors + trainer state, atomic, and a bit-identical resume on CPU."""

import json
import random

import numpy as np
import pytest
import torch
from scalerl.trainer.core.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from scalerl.trainer.core.losses import LossConfig
from scalerl.trainer.core.update import OptimConfig
from scalerl.trainer.distributed.leader import RankGroup
from transformers import LlamaForCausalLM

from tests.support.models import tiny_llama
from tests.trainer.core.test_policy_step import make_batch


def _group(seed):
    model = tiny_llama(seed=seed)
    model.config.attention_dropout = 0.1  # dropout makes the next step depend on the restored RNG
    for layer in model.model.layers:
        layer.self_attn.attention_dropout = 0.1
    return RankGroup.single(model, OptimConfig(lr=1e-3, warmup_steps=4), LossConfig())


def test_resume_gives_a_bit_identical_next_step(tmp_path):
    a = _group(seed=0)
    batch = make_batch(a.mirror)
    for _ in range(2):
        a.step(batch)
    save_checkpoint(tmp_path / "step_2", a.mirror, a.trainer, extra={"note": "test"})
    expected_draws = (random.random(), float(np.random.rand()))
    expected = a.step(batch)
    expected_params = {n: p.detach().clone() for n, p in a.mirror.named_parameters()}

    b = _group(seed=123)  # different weights until loaded
    torch.manual_seed(999), random.seed(999), np.random.seed(999)  # scrambled RNG until loaded
    summary = load_checkpoint(tmp_path / "step_2", b.mirror, b.trainer)
    assert summary == {"extra": {"note": "test"}, "step": 2, "policy_version": 2}
    assert (random.random(), float(np.random.rand())) == expected_draws
    got = b.step(batch)
    assert got["loss"] == expected["loss"] and got["grad_norm"] == expected["grad_norm"]
    assert got["lr"] == expected["lr"] and b.trainer.policy_version == 3
    for n, p in b.mirror.named_parameters():
        assert torch.equal(p, expected_params[n]), n


def test_checkpoint_is_a_loadable_hugging_face_model(tmp_path):
    a = _group(seed=0)
    path = save_checkpoint(tmp_path / "step_0", a.mirror)
    reloaded = LlamaForCausalLM.from_pretrained(path)
    for (n, p), (_, q) in zip(a.mirror.state_dict().items(), reloaded.state_dict().items()):
        assert torch.equal(p, q), n
    assert json.loads((path / "trainer_state.json").read_text()) == {"extra": {}}
    with pytest.raises(FileNotFoundError, match="model weights only"):
        load_checkpoint(path, a.mirror, a.trainer)


def test_write_is_atomic_and_latest_points_at_the_last_complete_one(tmp_path):
    a = _group(seed=0)
    (tmp_path / "~step_1").mkdir()  # debris of a crashed write
    (tmp_path / "~step_1" / "junk").write_text("x")
    save_checkpoint(tmp_path / "step_1", a.mirror, a.trainer)
    assert not (tmp_path / "~step_1").exists()
    assert latest_checkpoint(tmp_path) == tmp_path / "step_1"
    a.step(make_batch(a.mirror))
    save_checkpoint(tmp_path / "step_1", a.mirror, a.trainer)  # overwrite in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step_1"]
    assert json.loads((tmp_path / "step_1" / "trainer_state.json").read_text())["step"] == 1


def test_incomplete_or_mismatched_checkpoints_are_clear_errors(tmp_path):
    a = _group(seed=0)
    (tmp_path / "~half").mkdir()
    with pytest.raises(FileNotFoundError, match="not a complete checkpoint"):
        load_checkpoint(tmp_path / "~half", a.mirror, a.trainer)
    assert latest_checkpoint(tmp_path) is None
    path = save_checkpoint(tmp_path / "small", tiny_llama(vocab=64))
    with pytest.raises(RuntimeError, match="size mismatch"):
        load_checkpoint(path, a.mirror)
