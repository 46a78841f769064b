"""vLLM's own LoRA loading (real vLLM, CPU build) against the merged policy in `transformers`.

The engine is built as a LoRA run builds it (`build_engine` on the adapted model, `lora.vllm_adapters`):
its folder holds the base weights and the non-zero adapters come through a `LoRARequest`. Tolerance:
engine vs merged-weight recomputation (fp32, FP32 head) within 1e-4 per token (measured ~1e-6); the
same tokens under the base model differ by more than 0.05 (measured ~0.5). An in-flight push changes
only layer 1's o_proj and MLP adapters, so the KV cache of both layers is the same under either adapter
and the tokens after the switch can be checked exactly against a full recomputation.
"""

from __future__ import annotations

import copy
import time

import pytest
import torch

pytest.importorskip("vllm", reason="the vLLM tests run in .venv-vllm (make test-vllm)")

from safetensors.torch import load_file
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.core.fp32_head import token_logprobs
from scalerl.trainer.core.lora import adapter_state_dict, apply_lora, merged_state_dict
from scalerl.trainer.engines.base import GenerationRequest, SamplingParams
from scalerl.trainer.engines.factory import build_engine
from scalerl.trainer.tiny.model import CharTokenizer, TinyModelConfig, build_tiny_model, render_prompt

pytestmark = pytest.mark.vllm
TOK = CharTokenizer()
NEVER = 10_000  # a stop id outside the vocabulary: samples run to their budget
TOL = 1e-4
CFG = TrainConfig.model_validate({
    "engine": {"name": "vllm", "max_slots": 16, "max_seq_len": 256, "kv_cache_gib": 1},
    "lora": {"enabled": True, "rank": 4, "alpha": 8.0}})


def randomize(model, seed: int, only: str = "") -> None:
    """Non-zero adapters (B is zero after injection), in place; `only`: names containing it."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".lora_" in name and only in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)


def merged(base, adapted):
    m = copy.deepcopy(base)
    m.load_state_dict(merged_state_dict(adapted))
    return m


@pytest.fixture(scope="module")
def models():
    base = build_tiny_model(TinyModelConfig(num_layers=2, seed=1), TOK).eval()
    adapted = apply_lora(copy.deepcopy(base), CFG.lora)
    randomize(adapted, seed=0)
    return base, adapted


@pytest.fixture(scope="module")
def engine(models, tmp_path_factory):
    eng = build_engine(CFG.engine_spec(), models[1], TOK.eos_token_id, device="cpu", policy_version=0, seed=0,
                       work_dir=tmp_path_factory.mktemp("run"))
    yield eng
    eng.close()


def prompt_ids(text: str) -> list[int]:
    return [TOK.bos_token_id] + TOK.encode(render_prompt([{"role": "user", "content": text}]))


def errors(model, prompt, sample, version=None) -> list[float]:
    with torch.no_grad():
        ref = token_logprobs(model, torch.tensor(prompt + sample.token_ids), fp32_head=True, temperature=1.0)
    ref = ref[len(prompt):].tolist()
    return [abs(a - b) for a, b, v in zip(ref, sample.logprobs, sample.policy_versions) if version in (None, v)]


def run(engine, request_id: str, tokens: int, on_progress=None, after: int = 0):
    request = GenerationRequest(request_id=request_id, prompt_token_ids=prompt_ids("Count: 1 2 3"),
                                samples_per_prompt=4, sampling=SamplingParams(max_new_tokens=tokens,
                                                                              stop_token_ids=[NEVER], seed=5))
    start = engine.stats.sampled_tokens
    engine.submit(request)
    if on_progress is not None:
        while engine.stats.sampled_tokens - start < after:
            time.sleep(0.001)
        on_progress()
    got, deadline = [], time.monotonic() + 180
    while not got and time.monotonic() < deadline:
        got = engine.poll(0.2)
    assert got, f"{request_id} did not finish"
    return got[0]


def test_vllm_serves_the_adapters_on_the_base_weights_as_the_merged_policy(engine, models):
    base, adapted = models
    folder = load_file(f"{engine.model_dir}/model.safetensors")
    for k, v in base.state_dict().items():
        if k in folder:
            assert torch.equal(folder[k], v), f"{k}: the engine's folder must hold the base weights"
    group = run(engine, "first", 40)
    policy, prompt = merged(base, adapted), group.request.prompt_token_ids
    for s in group.samples:
        assert len(s.token_ids) == 40 and set(s.policy_versions) == {0}
        assert max(errors(policy, prompt, s)) < TOL
        assert max(errors(base, prompt, s)) > 0.05, "the adapters made no difference"


def test_a_push_replaces_the_adapter_in_flight_and_keeps_one_slot(engine, models):
    base, adapted = models
    version = engine.policy_version
    new = copy.deepcopy(adapted)
    randomize(new, seed=1, only="layers.1.mlp")  # layer 1's MLP only: the KV cache is unchanged (docstring)
    old_policy, new_policy = merged(base, adapted), merged(base, new)
    reference = run(engine, "ref", 160)
    updated = run(engine, "upd", 160, lambda: engine.update_weights(adapter_state_dict(new), version + 1),
                  after=4 * 30)
    try:
        prompt = updated.request.prompt_token_ids
        spanning = [s for s in updated.samples if len(set(s.policy_versions)) == 2]
        assert spanning, "no sample spans the push"
        for s, r in zip(updated.samples, reference.samples):
            v = s.policy_versions
            assert v == sorted(v) and set(v) <= {version, version + 1}
            switch = v.index(version + 1) if version + 1 in v else len(v)
            assert s.token_ids[:switch] == r.token_ids[:switch]  # same seed, same adapter: same prefix
            if switch > 0:
                assert max(errors(old_policy, prompt, s, version)) < TOL
            if switch < len(v):
                assert max(errors(new_policy, prompt, s, version + 1)) < TOL
                assert max(errors(old_policy, prompt, s, version + 1)) > 1e-2, "the push changed nothing"
        assert set(engine._call(engine.llm.list_loras())) == {1}  # one adapter, replaced: no growth per push
    finally:
        engine.update_weights(adapter_state_dict(adapted), version + 2)


def test_bad_adapters_are_refused_before_the_reload(engine, models):
    version = engine.policy_version
    good = adapter_state_dict(models[1])
    key = next(k for k in good if "lora_A" in k)
    with pytest.raises(ValueError, match="wrong shapes"):
        engine.update_weights({**good, key: torch.zeros(3, 3)}, version + 1)
    with pytest.raises(ValueError, match="missing"):
        engine.update_weights({k: v for k, v in good.items() if k != key}, version + 1)
    assert engine.policy_version == version
    assert run(engine, "after", 8).samples[0].policy_versions == [version] * 8


def test_the_lora_slot_vllm_allocates_is_the_planned_one(engine, models):
    """`scalerl.trainer.memory.lora.vllm_lora_slot_bytes` against the buffers vLLM's worker holds."""
    import json
    from pathlib import Path

    from scalerl.trainer.memory.lora import vllm_lora_slot_bytes
    from scalerl.trainer.memory.shapes import ModelShape

    shape = ModelShape.from_dict(json.loads((Path(engine.model_dir) / "config.json").read_text()))
    got = engine._call(engine.llm.collective_rpc("scalerl_lora_slot_bytes"))
    assert got == [vllm_lora_slot_bytes(shape, CFG.lora, "float32")]
    assert got[0] > 0
