"""bf16 on the CPU, as a GPU run uses it: `engine.dtype=bfloat16` generation, `optim.precision=bf16` updates.

On the CPU default's model (the shipped warm start): a bf16 engine samples, the trainer steps under bf16
autocast on fp32 master weights (loss finite, weights move, masters stay fp32), and engine and trainer
logprobs of the sampled tokens agree within `LOGPROB_TOL`. The FP32 head's effect on the mismatch is
measured on identical tokens (the engine's own decoder, teacher-forced, against the trainer's forward):
on SmolLM2 (vocabulary 49k, `slow`) the FP32 head narrows it; figures in docs/results.md.
"""

from __future__ import annotations

import copy

import pytest
import torch
from scalerl.env.contracts.paths import DATASETS
from scalerl.trainer.core.fp32_head import token_logprobs
from scalerl.trainer.core.recipe_config import LossConfig, OptimConfig
from scalerl.trainer.core.update import pack_samples
from scalerl.trainer.distributed.leader import RankGroup
from scalerl.trainer.engines.base import GenerationRequest, SamplingParams
from scalerl.trainer.engines.torch_engine import TorchEngine
from scalerl.trainer.tiny.model import CharTokenizer, render_prompt

# Sampled tokens, bf16 engine vs bf16-autocast trainer, FP32 head on both: measured on the CPU default's
# model mean 4.4e-3, max 0.13 (32 samples, 407 tokens).
LOGPROB_TOL = {"mean": 0.02, "max": 0.5}
QUESTIONS = ["What is 12+30?", "Compute 7*8.", "What is 45-17?", "def add(a, b): return"]


def cpu_default_model():
    """The CPU default's policy: the shipped warm start of the built-in tiny model (fp32)."""
    from transformers import AutoModelForCausalLM

    folder = next(p for p in sorted((DATASETS / "warm_start").iterdir()) if (p / "config.json").is_file())
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)


def sample(model, prompts, *, fp32_head=True, n=8, max_new_tokens=40):
    engine = TorchEngine(model, eos_token_id=2, dtype=torch.bfloat16, max_slots=n * len(prompts), max_seq_len=160,
                         fp32_head=fp32_head, seed=0)
    try:
        for i, p in enumerate(prompts):
            engine.submit(GenerationRequest(request_id=str(i), prompt_token_ids=p, samples_per_prompt=n,
                                            sampling=SamplingParams(max_new_tokens=max_new_tokens)))
        groups = []
        while len(groups) < len(prompts):
            groups += engine.poll(timeout_s=1.0)
    finally:
        engine.close()
    return [(g.request.prompt_token_ids, s) for g in groups for s in g.samples]


def trainer_logprobs(model, prompt, completion, fp32_head):
    ids = torch.tensor(list(prompt) + list(completion))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        return token_logprobs(model.eval(), ids, fp32_head=fp32_head)[len(prompt):]


def engine_logprobs(decoder, prompt, completion):
    """The engine decoder's logprobs of `completion` after `prompt`, teacher-forced in one prefill."""
    ids = torch.tensor([list(prompt) + list(completion)])
    t = ids.shape[1]
    mask = torch.ones(t, t, dtype=torch.bool).tril()[None]
    logits = decoder.forward(ids, torch.arange(t)[None], torch.tensor([0]), t, mask)[0].float()
    lp = torch.log_softmax(logits[:-1], -1).gather(-1, ids[0, 1:, None])[:, 0]
    return lp[len(prompt) - 1:]


def head_mismatch(model, pairs) -> dict[bool, float]:
    """Mean |engine - trainer| logprob on the same tokens, with and without the FP32 head on both sides."""
    from scalerl.trainer.engines.torch_decoder import SlotDecoder

    out = {}
    for fp32_head in (True, False):
        n = max(len(p) + len(c) for p, c in pairs)
        decoder = SlotDecoder(model, device="cpu", dtype=torch.bfloat16, max_slots=1, max_seq_len=n,
                              fp32_head=fp32_head)
        trainer = packed_trainer_logprobs(model, pairs, fp32_head)
        diffs = [(engine_logprobs(decoder, p, c) - t).abs() for (p, c), t in zip(pairs, trainer)]
        out[fp32_head] = float(torch.cat(diffs).mean())
    return out


@pytest.fixture(scope="module")
def tiny():
    tok = CharTokenizer()
    model = cpu_default_model()
    prompts = [[tok.bos_token_id] + tok.encode(render_prompt([{"role": "user", "content": q}])) for q in QUESTIONS]
    return model, sample(model, prompts)


def packed_trainer_logprobs(model, pairs, fp32_head):
    """`trainer_logprobs` of every (prompt, completion) pair in one packed forward (as the update runs it)."""
    rows = [list(p) + list(c) for p, c in pairs]
    ids = torch.tensor([t for r in rows for t in r])
    pos = torch.cat([torch.arange(len(r)) for r in rows])
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        lp = token_logprobs(model.eval(), ids, pos, fp32_head=fp32_head)
    out, start = [], 0
    for (p, c), r in zip(pairs, rows):
        out.append(lp[start + len(p): start + len(r)])
        start += len(r)
    return out


def test_engine_and_trainer_logprobs_agree_in_bf16(tiny):
    model, samples = tiny
    trainer = packed_trainer_logprobs(model, [(p, s.token_ids) for p, s in samples], True)
    diffs = torch.cat([(t - torch.tensor(s.logprobs)).abs() for t, (_, s) in zip(trainer, samples)])
    print(f"bf16 engine vs trainer, FP32 head: mean {float(diffs.mean()):.2e}, max {float(diffs.max()):.2e}")
    assert float(diffs.mean()) < LOGPROB_TOL["mean"] and float(diffs.max()) < LOGPROB_TOL["max"]


def test_a_bf16_step_runs_in_bf16_keeps_fp32_masters_and_moves_the_weights(tiny):
    model, samples = copy.deepcopy(tiny[0]), tiny[1]
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    group = RankGroup.single(model, OptimConfig(precision="bf16", warmup_steps=0), LossConfig())
    rewards = [float(i % 2) for i in range(len(samples))]  # a mixed-sign advantage in every group
    mean = sum(rewards) / len(rewards)
    batch = pack_samples([p for p, _ in samples], [s.token_ids for _, s in samples],
                         [s.logprobs for _, s in samples], [s.loss_mask for _, s in samples],
                         [r - mean for r in rewards], [i // 8 for i in range(len(samples))])
    seen = []
    hook = model.model.layers[0].self_attn.q_proj.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    try:
        metrics = group.step(batch)
    finally:
        hook.remove()
    assert set(seen) == {torch.bfloat16}
    assert torch.isfinite(torch.tensor(metrics["loss"])) and metrics["update_skipped"] == 0.0
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert max(float((v - before[k]).abs().max()) for k, v in model.state_dict().items()) > 0


@pytest.mark.slow
def test_a_bf16_step_of_smollm2_keeps_fp32_masters_and_moves_the_weights():
    """Up to ~80 s on 2 loaded cores (a bf16 forward and backward of 135 M parameters)."""
    from scalerl.trainer.engines.model_loading import load_hf_policy

    from tests.support.real_model import require_model

    model, _ = load_hf_policy(require_model())
    before = model.model.layers[0].mlp.down_proj.weight.detach().clone()
    g = torch.Generator().manual_seed(0)
    ids = [torch.randint(1, 49_000, (12,), generator=g).tolist() for _ in range(2)]
    batch = pack_samples([i[:4] for i in ids], [i[4:] for i in ids], [[-3.0] * 8] * 2, [[1] * 8] * 2, [1.0, -1.0],
                         [0, 0])
    metrics = RankGroup.single(model, OptimConfig(precision="bf16", warmup_steps=0), LossConfig()).step(batch)
    assert torch.isfinite(torch.tensor(metrics["loss"])) and metrics["update_skipped"] == 0.0
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert not torch.equal(model.model.layers[0].mlp.down_proj.weight, before)


def test_fp32_head_on_the_cpu_default_does_not_widen_the_gap(tiny):
    """Vocabulary 101: the head's rounding is small next to the bf16 body's, so only 'not worse' is stable."""
    model, samples = tiny
    gaps = head_mismatch(model, [(p, s.token_ids) for p, s in samples[::4]])
    print(f"CPU default, mean |engine - trainer|: FP32 head {gaps[True]:.2e}, bf16 head {gaps[False]:.2e}")
    assert gaps[True] < 1.5 * gaps[False]


@pytest.mark.slow
def test_fp32_head_narrows_the_bf16_gap_on_smollm2():
    """About 2-3 min on 2 loaded cores (two bf16 engines and forwards of a 135 M model)."""
    from scalerl.trainer.engines.model_loading import load_hf_policy

    from tests.support.real_model import require_model

    model, tok = load_hf_policy(require_model())
    prompts = []
    for q in ["What is 12+30?", "Name a prime number above 50.", "Write a Python function that adds two numbers."]:
        p = tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True)
        prompts.append(list(p["input_ids"] if hasattr(p, "keys") else p))
    samples = sample(model, prompts, n=2, max_new_tokens=24)
    gaps = head_mismatch(model, [(p, s.token_ids) for p, s in samples])
    print(f"SmolLM2, mean |engine - trainer|: FP32 head {gaps[True]:.2e}, bf16 head {gaps[False]:.2e}")
    assert gaps[True] < 0.8 * gaps[False]
