"""What a LoRA run sends vLLM (`lora.vllm_adapters`): the rule, vLLM's terms, and the PEFT folder, read by real PEFT.

No vLLM here (the main environment): the folder is checked by `peft.PeftModel.from_pretrained`, whose
merged model must equal `merged_state_dict`; vLLM loading that folder is tests/trainer/engines/
test_vllm_lora_engine.py (.venv-vllm).
"""

from __future__ import annotations

import copy
import json

import pytest
import torch
from scalerl.env.contracts.config_loader import ConfigError, load_config
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.core.lora import (
    ADAPTER_CONFIG,
    ADAPTER_FILE,
    adapter_state_dict,
    apply_lora,
    base_state_dict,
    merged_state_dict,
    write_peft_adapter,
)
from scalerl.trainer.core.lora_config import LoraConfig, pushes_adapters, vllm_lora_rank, vllm_target_modules

from tests.support.models import tiny_llama

LORA = LoraConfig(enabled=True, rank=4, alpha=8, target_modules=["q_proj", "v_proj", "down_proj"])


def cfg(*overrides: str) -> TrainConfig:
    return load_config(TrainConfig, None, list(overrides))


def test_the_push_sends_adapters_only_to_vllm_with_lora_and_the_setting_on():
    assert cfg("lora.enabled=true", "engine.name=vllm").engine_spec().pushes_adapters  # the default
    assert not cfg("lora.enabled=true", "engine.name=vllm", "lora.vllm_adapters=false").engine_spec().pushes_adapters
    assert not cfg("lora.enabled=true").engine_spec().pushes_adapters  # the torch engine: merged weights
    assert not pushes_adapters(LoraConfig(), "vllm")


def test_the_lora_section_in_vllm_terms_and_what_vllm_cannot_serve():
    from scalerl.trainer.run.setup import check_lora

    assert [vllm_lora_rank(LoraConfig(rank=r)) for r in (1, 4, 16, 17, 512)] == [1, 8, 16, 32, 512]
    assert vllm_target_modules(LoraConfig()) == ["down_proj", "gate_up_proj", "o_proj", "qkv_proj"]
    assert vllm_target_modules(LORA) == ["down_proj", "qkv_proj"]
    with pytest.raises(ValueError, match="up to rank 512"):
        vllm_lora_rank(LoraConfig(rank=600))
    with pytest.raises(ConfigError, match="lora.rank 600"):
        check_lora(cfg("lora.enabled=true", "engine.name=vllm", "lora.rank=600"))
    with pytest.raises(ConfigError, match=r"lora.target_modules \['fc1'\]"):
        check_lora(cfg("lora.enabled=true", "engine.name=vllm", "lora.target_modules=[fc1]"))
    with pytest.raises(ConfigError, match="weight_transfer"):
        check_lora(cfg("lora.enabled=true", "engine.name=vllm", "engine.vllm.weight_transfer=nccl"))
    check_lora(cfg("lora.enabled=true", "engine.name=vllm", "lora.rank=600", "lora.vllm_adapters=false"))


def test_the_peft_folder_loads_in_peft_as_the_merged_policy(tmp_path):
    from peft import PeftModel

    base = tiny_llama()
    adapted = apply_lora(copy.deepcopy(base), LORA)
    with torch.no_grad():
        for name, p in adapted.named_parameters():
            if ".lora_" in name:
                p.normal_(0, 0.2)
    assert {k: torch.equal(v, base.state_dict()[k]) for k, v in base_state_dict(adapted).items()} == {
        k: True for k in base.state_dict()}
    folder = write_peft_adapter(tmp_path / "adapter", adapter_state_dict(adapted), LORA)
    assert json.loads((folder / ADAPTER_CONFIG).read_text())["r"] == 4 and (folder / ADAPTER_FILE).is_file()
    peft = PeftModel.from_pretrained(copy.deepcopy(base), str(folder)).merge_and_unload()
    expected = merged_state_dict(adapted)
    assert set(peft.state_dict()) == set(expected)
    worst = max(float((peft.state_dict()[k] - v).abs().max()) for k, v in expected.items())
    assert worst < 1e-6
    assert max(float((expected[k] - v).abs().max()) for k, v in base.state_dict().items()) > 1e-2
