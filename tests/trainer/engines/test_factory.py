"""`scalerl.trainer.engines.factory`: the torch engine gets the configuration's dtype, slots, sequence length and
FP32 head; the vLLM engine gets the same settings and the same KV-cache budget; an unknown engine name
raises; validation builds its engine through the same function, the one place in the trainer that
constructs a `TorchEngine`."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
import torch
from scalerl import trainer
from scalerl.env.contracts.config_loader import ConfigError, load_config
from scalerl.trainer.config.presets import preset_values
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.engines import torch_engine
from scalerl.trainer.engines.factory import build_engine, build_torch_engine, vllm_settings
from scalerl.trainer.engines.vllm_engine import GIB, VLLMEngine, kv_cache_memory_bytes
from scalerl.trainer.rollout.problems import PromptCodec
from scalerl.trainer.run.validation import evaluate
from scalerl.trainer.tiny.model import CharTokenizer, build_tiny_model

from tests.support.tiny_policy import SMALL_MODEL, small_train_config

SETTINGS = ["engine.dtype=bfloat16", "engine.max_slots=7", "engine.max_seq_len=96"]


@pytest.fixture(scope="module")
def model():
    return build_tiny_model(SMALL_MODEL, CharTokenizer())


@pytest.mark.parametrize("fp32_head", [True, False])
def test_build_engine_gives_a_torch_engine_with_the_config(model, tmp_path, fp32_head):
    cfg = small_train_config(*SETTINGS, f"optim.fp32_head={str(fp32_head).lower()}")
    engine = build_engine(cfg.engine_spec(), model, 2, device="cpu", policy_version=5, seed=11, work_dir=tmp_path)
    try:
        assert type(engine) is torch_engine.TorchEngine
        d = engine.decoder
        assert (d.dtype, d.max_slots, d.max_seq_len, d.fp32_head) == (torch.bfloat16, 7, 96, fp32_head)
        assert all(t.dtype == torch.bfloat16 for t in d.params.values())
        assert engine.policy_version == 5 and engine.eos_token_id == 2
        assert engine._gen.initial_seed() == 11
        assert list(tmp_path.iterdir()) == []  # the torch engine writes no model folder
    finally:
        engine.close()


def test_build_torch_engine_takes_a_slot_override(model):
    cfg = small_train_config(*SETTINGS)
    engine = build_torch_engine(cfg.engine, model, 2, fp32_head=True, device="cpu", policy_version=0, seed=0,
                                max_slots=64)
    try:
        assert (engine.decoder.max_slots, engine.decoder.max_seq_len, engine.decoder.dtype) == (64, 96, torch.bfloat16)
    finally:
        engine.close()


def test_an_unknown_engine_name_raises(model, tmp_path):
    cfg = small_train_config()
    cfg = cfg.model_copy(update={"engine": cfg.engine.model_copy(update={"name": "tpu"})})  # past validation
    with pytest.raises(ValueError, match="unknown engine.name 'tpu'"):
        build_engine(cfg.engine_spec(), model, 2, device="cpu", policy_version=0, seed=0, work_dir=tmp_path)


def test_the_paper_presets_kv_cache_budget_reaches_the_vllm_engine():
    """One KV-cache setting serves either engine: `--preset paper --engine vllm` gives vLLM the preset's
    `engine.kv_cache_gib` (2 GiB) as its `kv_cache_memory_bytes`, on a GPU and on a CPU."""
    cfg = load_config(TrainConfig, None, ["engine.name=vllm"], base=preset_values("paper"))
    settings = vllm_settings(cfg.engine_spec())
    assert set(settings) <= set(inspect.signature(VLLMEngine).parameters)  # every key is an engine keyword
    assert settings["kv_cache_gib"] == cfg.engine.kv_cache_gib == 2
    assert kv_cache_memory_bytes(settings["kv_cache_gib"], on_cpu=False) == 2 * GIB
    assert kv_cache_memory_bytes(settings["kv_cache_gib"], on_cpu=True) == 2 * GIB
    assert kv_cache_memory_bytes(None, on_cpu=True) == GIB  # unset on a CPU: 1 GiB, as before
    assert kv_cache_memory_bytes(None, on_cpu=False) is None  # unset on a GPU: gpu_memory_utilization decides
    with pytest.raises(ConfigError, match="engine.kv_cache_gib"):  # the second name is gone, pointing at the one
        load_config(TrainConfig, None, ["engine.vllm.kv_cache_gib=1"])


def test_the_config_refuses_an_unknown_engine_name():
    with pytest.raises(ConfigError, match="engine.name"):
        small_train_config("engine.name=tpu")


def test_validation_builds_its_engine_with_the_run_settings(model, monkeypatch):
    built = []

    class Recording(torch_engine.TorchEngine):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built.append(self)

    monkeypatch.setattr(torch_engine, "TorchEngine", Recording)
    cfg = small_train_config(*SETTINGS, "optim.fp32_head=false", "validation.min_evaluations_per_domain=3")
    problems = build_pools_math()
    evaluate(model, PromptCodec(CharTokenizer()), {"math": problems}, cfg, FakeVerifier(), device="cpu",
             policy_version=4)
    assert len(built) == 1
    d = built[0].decoder
    # slots are the run's engine.max_slots (bounded by engine.kv_cache_gib), never the evaluation count
    assert (d.dtype, d.max_seq_len, d.fp32_head, d.max_slots) == (torch.bfloat16, 96, False, 7)
    assert built[0].policy_version == 4


def test_only_the_factory_constructs_a_torch_engine():
    root = Path(trainer.__file__).parent
    callers = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if name == "TorchEngine":
                    callers.append(str(path.relative_to(root)))
    assert callers == ["engines/factory.py"]


def build_pools_math():
    from scalerl.trainer.config.train import TrainConfig
    from scalerl.trainer.run.data_sources import build_data

    cfg = TrainConfig.model_validate({"domains": ["math"], "data": {"generated_per_domain": 20,
                                                                    "holdout_fraction": 0.1, "holdout_max_prompts": 2}})
    return build_data(cfg)["math"].holdout


class FakeVerifier:
    """Every completion wrong (the test is about the engine, not the scores)."""

    def verify_batch(self, items):
        from scalerl.env.contracts.records import Verdict

        return [Verdict.of("wrong", id=item.id) for item in items]
