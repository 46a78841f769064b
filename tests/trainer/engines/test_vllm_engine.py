"""The vLLM engine (real vLLM, CPU build) against a real `transformers` forward of the same tiny Llama.

One engine per module (start-up is ~40 s); every test leaves it with the original weights loaded.
Tolerance: generator vs trainer logprobs (both fp32, FP32 head) within 1e-4 absolute per token
(measured: ~1e-6, interrupted samples included). Interruption is checked to happen inside one vLLM
request: the engine's request count equals the number of samples, the phrase sits exactly at the
think budget, and an in-flight update after the phrase continues the same request.
"""

from __future__ import annotations

import time

import pytest
import torch

pytest.importorskip("vllm", reason="the vLLM tests run in .venv-vllm (make test-vllm)")

from scalerl.trainer.core.fp32_head import token_logprobs
from scalerl.trainer.engines.base import GenerationRequest, InterruptionPlan, SamplingParams
from scalerl.trainer.engines.vllm_engine import VLLMEngine
from scalerl.trainer.tiny.model import CharTokenizer, TinyModelConfig, build_tiny_model, render_prompt, save_tiny

pytestmark = pytest.mark.vllm
TOK = CharTokenizer()
NEVER = 10_000  # a stop id outside the vocabulary: samples run to their budget
TOL = 1e-4


@pytest.fixture(scope="module")
def model():
    return build_tiny_model(TinyModelConfig(num_layers=2, seed=1), TOK).eval()


@pytest.fixture(scope="module")
def engine(model, tmp_path_factory):
    folder = save_tiny(tmp_path_factory.mktemp("tiny"), model, TOK)
    eng = VLLMEngine(
        folder,
        eos_token_id=TOK.eos_token_id,
        max_slots=32,
        max_seq_len=256,
        seed=0,
        kv_cache_gib=1,
    )
    yield eng
    eng.close()


def prompt_ids(text: str) -> list[int]:
    return [TOK.bos_token_id] + TOK.encode(render_prompt([{"role": "user", "content": text}]))


def trainer_logprobs(model, prompt: list[int], completion: list[int], head_scale: float = 1.0) -> list[float]:
    """The trainer's recomputation: packed forward, FP32 head
    (`scalerl.trainer.core.fp32_head`), head x `head_scale`."""
    with torch.no_grad():
        lp = token_logprobs(
            model, torch.tensor(prompt + completion), fp32_head=True, temperature=1 / head_scale
        )
    return lp[len(prompt) :].tolist()


def collect(engine, n_groups: int, timeout_s: float = 180.0):
    got, deadline = [], time.monotonic() + timeout_s
    while len(got) < n_groups and time.monotonic() < deadline:
        got += engine.poll(0.5)
    assert len(got) == n_groups, f"only {len(got)} of {n_groups} groups finished"
    return sorted(got, key=lambda g: g.request.request_id)


def max_sampled_error(model, prompt, sample, versions_of=None, head_scale: float = 1.0) -> float:
    ref = trainer_logprobs(model, prompt, sample.token_ids, head_scale)
    return max(
        abs(a - b)
        for a, b, m, v in zip(ref, sample.logprobs, sample.loss_mask, sample.policy_versions)
        if m and (versions_of is None or v == versions_of)
    )


PLAN = InterruptionPlan(
    think_budget_tokens=12, phrase_token_ids=TOK.encode(" Time is up. "), answer_budget_tokens=8
)
N_PHRASE = len(PLAN.phrase_token_ids)
# Stop ids for a request that should stop during thinking in some samples: none is in the phrase.
STOPS = [t for t in TOK.encode("0123456789") if t not in PLAN.phrase_token_ids]


def assert_interrupted_in_one_request(s, stops) -> None:
    """Phrase exactly at the think budget (one request: no re-prefill), masked, logprob 0.0 from vLLM."""
    b = PLAN.think_budget_tokens
    assert s.interrupted and s.token_ids[b : b + N_PHRASE] == PLAN.phrase_token_ids
    assert s.loss_mask == [1] * b + [0] * N_PHRASE + [1] * (len(s.token_ids) - b - N_PHRASE)
    assert s.logprobs[b : b + N_PHRASE] == [0.0] * N_PHRASE  # processed logprob of a forced token
    assert not set(s.token_ids[:b]) & set(stops)
    answer = s.token_ids[b + N_PHRASE :]
    if s.finish_reason == "stop":
        assert answer[-1] in stops and not set(answer[:-1]) & set(stops)
    else:
        assert s.finish_reason == "length" and len(answer) == PLAN.answer_budget_tokens


def test_generator_logprobs_match_trainer_recomputation_with_interruption(engine, model):
    """All requests in flight together; every sample is one vLLM request (the phrase is forced inside it)."""
    texts = ["1+2=?", "What is 17-9?", "f(1)=3, f(2)=5. Write f."]
    requests = [
        GenerationRequest(
            request_id=f"a{i}",
            prompt_token_ids=prompt_ids(text),
            samples_per_prompt=3,
            sampling=SamplingParams(stop_token_ids=[NEVER], seed=i),
            interruption=PLAN,
        )
        for i, text in enumerate(texts)
    ]
    requests.append(
        GenerationRequest(
            request_id="b",
            prompt_token_ids=prompt_ids("9*9"),
            samples_per_prompt=2,
            sampling=SamplingParams(max_new_tokens=30, seed=9),
        )
    )
    requests.append(
        GenerationRequest(
            request_id="c",
            prompt_token_ids=prompt_ids("Say 7"),
            samples_per_prompt=6,
            sampling=SamplingParams(stop_token_ids=STOPS, seed=3),
            interruption=PLAN,
        )
    )
    issued = engine.stats.vllm_requests
    for r in requests:
        engine.submit(r)
    groups = collect(engine, len(requests))
    assert engine.stats.vllm_requests - issued == sum(r.samples_per_prompt for r in requests)
    errors = {True: [0.0], False: [0.0]}
    for g in groups:
        for s in g.samples:
            errors[s.interrupted].append(max_sampled_error(model, g.request.prompt_token_ids, s))
            assert errors[s.interrupted][-1] < TOL
            assert len(set(s.policy_versions)) == 1
    print(
        f"max abs logprob error: interrupted {max(errors[True]):.2e} ({len(errors[True]) - 1} samples), "
        f"others {max(errors[False]):.2e} ({len(errors[False]) - 1})"
    )
    for g in groups[:3]:
        for s in g.samples:
            assert_interrupted_in_one_request(s, [NEVER])
            assert s.finish_reason == "length"
    plain = groups[3].samples
    assert all(not s.interrupted and s.finish_reason in ("stop", "length") for s in plain)
    assert all(s.token_ids[-1] == TOK.eos_token_id for s in plain if s.finish_reason == "stop")
    early = [s for s in groups[4].samples if not s.interrupted]
    # Seeded: 4 of 6 stop while thinking, one is interrupted and stops in the answer, one runs out.
    assert early and len(early) < len(groups[4].samples), "'c' needs both outcomes; pick other stop ids"
    for s in early:  # the stop rule during thinking is unchanged: a stop at or before the budget ends it
        assert s.finish_reason == "stop" and len(s.token_ids) <= PLAN.think_budget_tokens
        assert s.token_ids[-1] in STOPS and not set(s.token_ids[:-1]) & set(STOPS)
        assert s.loss_mask == [1] * len(s.token_ids)
    for s in groups[4].samples:
        if s.interrupted:
            assert_interrupted_in_one_request(s, STOPS)


def test_phrase_with_a_stop_token_is_rejected(engine):
    plan = PLAN.model_copy(update={"phrase_token_ids": [*PLAN.phrase_token_ids, TOK.eos_token_id]})
    with pytest.raises(ValueError, match="stop tokens"):
        engine.submit(GenerationRequest(request_id="p", prompt_token_ids=prompt_ids("1"), interruption=plan))


UPDATE_PLAN = InterruptionPlan(
    think_budget_tokens=30, phrase_token_ids=PLAN.phrase_token_ids, answer_budget_tokens=100
)
N_SAMPLES = 8


def _run(engine, request_id: str, on_progress=None):
    request = GenerationRequest(
        request_id=request_id,
        prompt_token_ids=prompt_ids("Count: 1 2 3"),
        samples_per_prompt=N_SAMPLES,
        sampling=SamplingParams(stop_token_ids=[NEVER], seed=5),
        interruption=UPDATE_PLAN,
    )
    start = engine.stats.sampled_tokens
    engine.submit(request)
    if on_progress is not None:  # samples decode in one batch: this is a few tokens past every phrase
        past_phrase = N_SAMPLES * (UPDATE_PLAN.think_budget_tokens + N_PHRASE + 4)
        while engine.stats.sampled_tokens - start < past_phrase:
            time.sleep(0.001)
        on_progress()
    return collect(engine, 1)[0]


def test_in_flight_update_shows_in_versions_and_changes_the_continuation(engine, model):
    """An update between thinking and answer, in the same request: thinking and phrase keep the old
    version, the answer continues on the kept KV cache with the new weights (same body, LM head x3:
    later tokens follow softmax(3 * logits))."""
    old_version = engine.policy_version
    new_weights = dict(model.state_dict())
    new_weights["lm_head.weight"] = new_weights["lm_head.weight"] * 3.0
    reference = _run(engine, "ref")
    updated = _run(engine, "upd", lambda: engine.update_weights(new_weights, old_version + 1))
    try:
        prompt = updated.request.prompt_token_ids
        spanning = [s for s in updated.samples if len(set(s.policy_versions)) == 2]
        assert spanning, "no sample spans the update"
        after_phrase = UPDATE_PLAN.think_budget_tokens + N_PHRASE
        for s, r in zip(updated.samples, reference.samples):
            v = s.policy_versions
            assert s.interrupted
            assert s.token_ids[after_phrase - N_PHRASE : after_phrase] == PLAN.phrase_token_ids
            assert v == sorted(v) and set(v) <= {old_version, old_version + 1}
            switch = v.index(old_version + 1) if old_version + 1 in v else len(v)
            assert s.token_ids[:switch] == r.token_ids[:switch]  # same seed, same weights: same prefix
            if switch < len(v):
                assert switch >= after_phrase, "the update landed before the phrase"
                assert s.token_ids[switch:] != r.token_ids[switch:]
                assert max_sampled_error(model, prompt, s, versions_of=old_version + 1, head_scale=3.0) < TOL
            if switch > 0:
                assert max_sampled_error(model, prompt, s, versions_of=old_version) < TOL
    finally:
        engine.update_weights(model.state_dict(), old_version + 2)


def test_bad_weights_are_rejected_before_reload_and_engine_keeps_working(engine, model):
    version = engine.policy_version
    bad = dict(model.state_dict())
    bad["model.norm.weight"] = torch.ones(7)
    with pytest.raises(ValueError, match="model.norm.weight"):
        engine.update_weights(bad, version + 1)
    missing = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}
    with pytest.raises(ValueError, match="lm_head.weight"):
        engine.update_weights(missing, version + 1)
    with pytest.raises(ValueError, match="max_seq_len"):
        engine.submit(
            GenerationRequest(
                request_id="long", prompt_token_ids=[1] * 200, sampling=SamplingParams(max_new_tokens=100)
            )
        )
    assert engine.policy_version == version
    engine.submit(
        GenerationRequest(
            request_id="after",
            prompt_token_ids=prompt_ids("2+2"),
            sampling=SamplingParams(max_new_tokens=10, seed=1),
        )
    )
    (group,) = collect(engine, 1)
    assert max_sampled_error(model, group.request.prompt_token_ids, group.samples[0]) < TOL
