"""LoRA (`lora.enabled`, PEFT adapters): the update trains the adapters only, the push and the checkpoints'
HF files hold the merged policy, checkpoints hold the adapters and resume bit-identically.

Real PEFT, real torch steps: the tiny Llama of the tests, the CPU default (a short `train` run and its
resume) and SmolLM2 (one update of the shipped model).
"""

from __future__ import annotations

import copy

import pytest
import torch
from safetensors.torch import load_file
from scalerl.env.contracts.config_loader import ConfigError, load_config
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.core.lora import ADAPTER_FILE, adapter_state_dict, apply_lora, merged_state_dict
from scalerl.trainer.core.lora_config import LoraConfig
from scalerl.trainer.core.recipe_config import LossConfig, OptimConfig
from scalerl.trainer.core.update import pack_samples
from scalerl.trainer.distributed.leader import RankGroup

from tests.support.models import tiny_llama

LORA = LoraConfig(enabled=True, rank=4, alpha=8)
OPTIM = OptimConfig(lr=1e-2, warmup_steps=0)


def batch(seed: int, n: int = 4, vocab: int = 96):
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(1, vocab, (4,), generator=g).tolist() for _ in range(n)]
    completions = [torch.randint(1, vocab, (6,), generator=g).tolist() for _ in range(n)]
    return pack_samples(prompts, completions, [[-3.0] * 6] * n, [[1] * 6] * n,
                        [1.0 if i % 2 else -1.0 for i in range(n)], [i // 2 for i in range(n)])


def one_rank(model, lora=LORA):
    return RankGroup.single(model, OPTIM, LossConfig(), lora=lora)


def test_the_update_moves_the_adapters_only_and_the_push_is_the_merged_policy():
    base = tiny_llama(tied=True)
    group = one_rank(copy.deepcopy(base))
    lora_model = group.trainer.model
    frozen = {k: v.clone() for k, v in lora_model.state_dict().items() if ".lora_" not in k}
    before = {k: v.clone() for k, v in adapter_state_dict(lora_model).items()}
    assert {id(p) for g in group.trainer.optimizer.param_groups for p in g["params"]} == {
        id(p) for n, p in lora_model.named_parameters() if ".lora_" in n}
    group.step(batch(1))
    group.step(batch(2))
    assert all(torch.equal(v, frozen[k]) for k, v in lora_model.state_dict().items() if k in frozen)
    assert any(not torch.equal(v, before[k]) for k, v in adapter_state_dict(lora_model).items())
    pushed = group.gather_weights()
    assert set(pushed) == set(base.state_dict())  # plain Hugging Face names for the engines
    assert not torch.equal(pushed["model.layers.0.self_attn.q_proj.weight"],
                           base.state_dict()["model.layers.0.self_attn.q_proj.weight"])
    assert torch.equal(pushed["model.norm.weight"], base.state_dict()["model.norm.weight"])
    ids = torch.randint(0, 96, (1, 12))
    with torch.no_grad():
        assert torch.allclose(group.mirror(ids).logits, lora_model(ids).logits, atol=1e-5)


def test_checkpoint_holds_the_adapters_and_resume_is_bit_identical(tmp_path):
    base = tiny_llama(tied=True)
    group = one_rank(copy.deepcopy(base))
    group.step(batch(1))
    group.save_checkpoint(tmp_path / "ckpt")
    saved = load_file(str(tmp_path / "ckpt" / ADAPTER_FILE))
    assert set(saved) == set(adapter_state_dict(group.trainer.model))
    group.step(batch(2))
    expected = merged_state_dict(group.trainer.model)

    resumed = one_rank(copy.deepcopy(base))  # the base from the run's source, as `scalerl train --resume` loads it
    resumed.load_checkpoint(tmp_path / "ckpt")
    assert resumed.trainer.step_count == 1
    resumed.step(batch(2))
    got = merged_state_dict(resumed.trainer.model)
    assert all(torch.equal(got[k], expected[k]) for k in expected)

    plain = one_rank(copy.deepcopy(base), lora=LoraConfig())  # lora off: the checkpoint's adapters are refused
    with pytest.raises(ValueError, match="LoRA"):
        plain.load_checkpoint(tmp_path / "ckpt")


def test_lora_settings_that_cannot_run_are_refused():
    from scalerl.trainer.run.setup import check_lora

    with pytest.raises(ValueError, match="lm_head"):
        LoraConfig(target_modules=["q_proj", "lm_head"])
    with pytest.raises(ValueError, match="lora.target_modules"):
        apply_lora(tiny_llama(), LoraConfig(enabled=True, target_modules=["no_such_proj"]))
    with pytest.raises(ConfigError, match="lora.enabled"):
        check_lora(load_config(TrainConfig, None, ["lora.enabled=true", "trainer_ranks.count=2"]))
    check_lora(load_config(TrainConfig, None, ["lora.enabled=true"]))
    check_lora(load_config(TrainConfig, None, ["lora.enabled=true", "engine.name=vllm"]))  # adapters to vLLM


def test_a_lora_run_of_the_cpu_default_trains_the_adapters_and_resumes(tmp_path):
    """Four steps of the CPU default with adapters, a checkpoint at 2, then a resume to step 4."""
    from scalerl.trainer.run.log import read_metrics
    from scalerl.trainer.run.loop import train
    from scalerl.trainer.tiny.warm_start import SHIPPED

    args = ["lora.enabled=true", "optim.lr=1e-3", "pipeline.max_time_s=null", "validation.enabled=false",
            "checkpoint.every_steps=2", "logging.progress=lines", "pipeline.prompts_per_step=4", "pipeline.k=1"]
    out = tmp_path / "run"
    train(load_config(TrainConfig, None, [*args, "pipeline.max_steps=2"]), out)
    train(load_config(TrainConfig, None, [*args, "pipeline.max_steps=4"]), out, resume=True)
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl", "step")] == [1, 2, 3, 4]
    ckpt = out / "checkpoints" / (out / "checkpoints" / "latest").read_text().strip()
    adapters = load_file(str(ckpt / ADAPTER_FILE))
    assert any(float(v.abs().max()) > 0 for k, v in adapters.items() if "lora_B" in k)  # B starts at zero
    start = load_file(str(next(p for p in sorted(SHIPPED.iterdir()) if (p / "config.json").is_file())
                          / "model.safetensors"))
    merged = load_file(str(ckpt / "model.safetensors"))
    assert torch.equal(merged["model.embed_tokens.weight"], start["model.embed_tokens.weight"])  # not adapted
    assert not torch.equal(merged["model.layers.0.mlp.down_proj.weight"], start["model.layers.0.mlp.down_proj.weight"])


def test_one_lora_update_of_smollm2_moves_adapters_not_base_weights():
    from scalerl.trainer.engines.model_loading import load_hf_policy

    from tests.support.real_model import require_model

    model, _ = load_hf_policy(require_model())
    apply_lora(model, LoraConfig(enabled=True, rank=8, target_modules=["q_proj", "v_proj"]))
    frozen = {k: v.clone() for k, v in model.state_dict().items() if ".lora_" not in k}
    group = RankGroup.single(model, OptimConfig(lr=1e-3, warmup_steps=0, micro_batch_tokens=64), LossConfig())
    metrics = group.step(batch(3, n=2, vocab=49_000))
    assert torch.isfinite(torch.tensor(metrics["loss"])) and metrics["grad_norm"] > 0
    assert all(torch.equal(v, frozen[k]) for k, v in model.state_dict().items() if k in frozen)
    assert any(float(v.abs().max()) > 0 for k, v in adapter_state_dict(model).items() if "lora_B" in k)
