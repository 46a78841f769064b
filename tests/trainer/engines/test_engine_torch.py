"""The torch engine against a real `transformers` forward of the same tiny Llama (one property per test)."""

from __future__ import annotations

import time

import pytest
import torch
from scalerl.trainer.engines.base import GenerationRequest, InterruptionPlan, SamplingParams
from scalerl.trainer.engines.torch_engine import TorchEngine
from scalerl.trainer.tiny.model import CharTokenizer, TinyModelConfig, build_tiny_model, render_prompt

TOK = CharTokenizer()
NEVER = 10_000  # a stop id outside the vocabulary: samples run to their budget


@pytest.fixture(scope="module")
def model():
    return build_tiny_model(TinyModelConfig(num_layers=2, seed=1), TOK).eval()


def prompt_ids(text: str) -> list[int]:
    return [TOK.bos_token_id] + TOK.encode(render_prompt([{"role": "user", "content": text}]))


def ref_logprobs(model, prompt: list[int], completion: list[int], scale: float = 1.0) -> list[float]:
    """log softmax(scale * logits) of `completion` under a plain transformers forward."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0].float() * scale
    lp = torch.log_softmax(logits, -1)
    return [lp[len(prompt) - 1 + i, t].item() for i, t in enumerate(completion)]


def collect(engine: TorchEngine, n_groups: int, timeout_s: float = 120.0):
    got, deadline = [], time.monotonic() + timeout_s
    while len(got) < n_groups and time.monotonic() < deadline:
        got += engine.poll(0.5)
    assert len(got) == n_groups, f"only {len(got)} of {n_groups} groups finished"
    return got


def test_logprobs_equal_transformers_forward_across_admission_and_compaction(model):
    # 3 slots for 4 groups x 2 samples: groups wait for free slots and finished samples are compacted.
    engine = TorchEngine(model, eos_token_id=TOK.eos_token_id, max_slots=3, max_seq_len=128, seed=3)
    texts = ["1+2=?", "What is 17-9?", "f(1)=3, f(2)=5, f(3)=7. Write f.", "9*9"]
    for i, text in enumerate(texts):
        engine.submit(GenerationRequest(request_id=str(i), prompt_token_ids=prompt_ids(text), samples_per_prompt=2,
                                        sampling=SamplingParams(max_new_tokens=10 + 7 * i)))
    groups = collect(engine, len(texts))
    engine.close()
    assert engine.num_pending() == 0
    for g in groups:
        for s in g.samples:
            ref = ref_logprobs(model, g.request.prompt_token_ids, s.token_ids)
            assert max(abs(a - b) for a, b in zip(ref, s.logprobs)) < 1e-4
            assert s.policy_versions == [0] * len(s.token_ids)
            assert s.finish_reason in ("stop", "length")


def test_recorded_logprob_is_of_the_tempered_distribution(model):
    engine = TorchEngine(model, eos_token_id=TOK.eos_token_id, max_slots=4, max_seq_len=64)
    engine.submit(GenerationRequest(request_id="t", prompt_token_ids=prompt_ids("2+2"), samples_per_prompt=2,
                                    sampling=SamplingParams(temperature=0.5, max_new_tokens=12)))
    (g,) = collect(engine, 1)
    engine.close()
    for s in g.samples:
        ref = ref_logprobs(model, g.request.prompt_token_ids, s.token_ids, scale=2.0)
        assert max(abs(a - b) for a, b in zip(ref, s.logprobs)) < 1e-4


def test_a_seeded_request_gets_the_same_tokens_whatever_runs_beside_it(model):
    """`SamplingParams.seed` is honoured (as vLLM does): the same seed gives the same tokens, in one engine
    beside other requests or alone in another engine with another engine seed; another seed differs; the
    samples of one request draw from different streams."""
    def request(rid: str, seed: int | None) -> GenerationRequest:
        return GenerationRequest(request_id=rid, prompt_token_ids=prompt_ids("1+2=?"), samples_per_prompt=2,
                                 sampling=SamplingParams(max_new_tokens=24, stop_token_ids=[NEVER], seed=seed))

    def tokens(groups, rid: str) -> list[list[int]]:
        return [s.token_ids for s in next(g for g in groups if g.request.request_id == rid).samples]

    engine = TorchEngine(model, eos_token_id=TOK.eos_token_id, max_slots=8, max_seq_len=64, seed=0)
    for rid, seed in (("a", 7), ("unseeded", None), ("b", 7), ("c", 8)):
        engine.submit(request(rid, seed))
    groups = collect(engine, 4)
    engine.close()
    alone = TorchEngine(model, eos_token_id=TOK.eos_token_id, max_slots=8, max_seq_len=64, seed=5)
    alone.submit(request("a", 7))
    again = collect(alone, 1)
    alone.close()
    a = tokens(groups, "a")
    assert len(a[0]) == 24 and a[0] != a[1]
    assert tokens(groups, "b") == a == tokens(again, "a")
    assert tokens(groups, "c")[0] != a[0] and tokens(groups, "c")[1] != a[1]


def test_in_flight_update_spans_two_versions_and_later_tokens_use_new_weights(model):
    """New weights = same body, LM head x2: with the KV cache kept, later tokens follow softmax(2 * logits)."""
    engine = TorchEngine(model, eos_token_id=TOK.eos_token_id, max_slots=4, max_seq_len=400, seed=5)
    prompt = prompt_ids("3+4")
    engine.submit(GenerationRequest(request_id="long", prompt_token_ids=prompt, samples_per_prompt=1,
                                    sampling=SamplingParams(max_new_tokens=300, stop_token_ids=[NEVER])))
    deadline = time.monotonic() + 60
    while engine.stats.sampled_tokens < 20 and time.monotonic() < deadline:
        time.sleep(0.001)
    prefilled = engine.stats.prefill_tokens
    new_head = {"lm_head.weight": model.lm_head.weight.detach() * 2.0}
    engine.update_weights(new_head, policy_version=1)
    (g,) = collect(engine, 1)
    engine.close()
    s = g.samples[0]
    assert engine.stats.prefill_tokens == prefilled, "the running sequence must not be re-prefilled"
    switch = s.policy_versions.index(1)
    assert 20 <= switch < len(s.token_ids) - 1
    assert set(s.policy_versions[:switch]) == {0} and set(s.policy_versions[switch:]) == {1}
    old = ref_logprobs(model, prompt, s.token_ids, scale=1.0)
    new = ref_logprobs(model, prompt, s.token_ids, scale=2.0)
    assert max(abs(a - b) for a, b in zip(old[:switch], s.logprobs[:switch])) < 1e-4
    assert max(abs(a - b) for a, b in zip(new[switch:], s.logprobs[switch:])) < 1e-4
    assert max(abs(a - b) for a, b in zip(old[switch:], s.logprobs[switch:])) > 1e-2


def test_interruption_injects_loss_masked_phrase_then_answer_budget(model):
    engine = TorchEngine(model, eos_token_id=TOK.eos_token_id, max_slots=4, max_seq_len=128)
    phrase = TOK.encode(" time is up ")
    plan = InterruptionPlan(think_budget_tokens=6, phrase_token_ids=phrase, answer_budget_tokens=5)
    engine.submit(GenerationRequest(request_id="i", prompt_token_ids=prompt_ids("1+1"), samples_per_prompt=2,
                                    sampling=SamplingParams(stop_token_ids=[NEVER]), interruption=plan))
    (g,) = collect(engine, 1)
    engine.close()
    for s in g.samples:
        assert s.interrupted and s.finish_reason == "length" and s.truncated
        assert s.token_ids[6:6 + len(phrase)] == phrase
        assert s.loss_mask == [1] * 6 + [0] * len(phrase) + [1] * 5


def test_bad_requests_and_bad_weights_fail_before_changing_anything(model):
    engine = TorchEngine(model, eos_token_id=TOK.eos_token_id, max_slots=2, max_seq_len=32)
    with pytest.raises(ValueError, match="max_seq_len"):
        engine.submit(GenerationRequest(request_id="x", prompt_token_ids=prompt_ids("1+1"),
                                        sampling=SamplingParams(max_new_tokens=100)))
    before = engine.decoder.params["lm_head.weight"].clone()
    with pytest.raises(ValueError, match="shape"):
        engine.update_weights({"lm_head.weight": torch.zeros(3, 3)}, 1)
    with pytest.raises(KeyError, match="unknown parameter"):
        engine.update_weights({"lm_head.weight": before, "nope": before}, 1)
    assert torch.equal(engine.decoder.params["lm_head.weight"], before) and engine.policy_version == 0
    engine.close()


def test_fp32_head_switch_on_bf16_body(model):
    """bf16 body: the fp32 head matches the fp32 reference more closely than a bf16 head."""
    errs = {}
    for fp32_head in (True, False):
        engine = TorchEngine(model, eos_token_id=TOK.eos_token_id, dtype=torch.bfloat16, max_slots=2,
                             max_seq_len=64, fp32_head=fp32_head, seed=0)
        engine.submit(GenerationRequest(request_id="b", prompt_token_ids=prompt_ids("5*5"), samples_per_prompt=2,
                                        sampling=SamplingParams(max_new_tokens=20, stop_token_ids=[NEVER])))
        (g,) = collect(engine, 1)
        engine.close()
        errs[fp32_head] = max(
            abs(a - b) for s in g.samples
            for a, b in zip(ref_logprobs(model, g.request.prompt_token_ids, s.token_ids), s.logprobs))
    assert errs[True] < 0.2 and errs[False] < 0.5


@pytest.mark.gpu
def test_cuda_logprobs_equal_transformers_forward(model):
    engine = TorchEngine(model, eos_token_id=TOK.eos_token_id, device="cuda", max_slots=8, max_seq_len=64)
    engine.submit(GenerationRequest(request_id="c", prompt_token_ids=prompt_ids("8-3"), samples_per_prompt=4,
                                    sampling=SamplingParams(max_new_tokens=20)))
    (g,) = collect(engine, 1)
    engine.close()
    for s in g.samples:
        ref = ref_logprobs(model, g.request.prompt_token_ids, s.token_ids)
        assert max(abs(a - b) for a, b in zip(ref, s.logprobs)) < 1e-3
