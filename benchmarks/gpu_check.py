"""GPU check (E9): torch-engine tokens/s, a bf16 training step, and the FP32-head logprob mismatch.

Run through `benchmarks/gpu_check.sh` on a CUDA machine (no registry needed: nothing downloads; the
model is a random Llama built from a config). Each figure has its baseline from the same process:
- engine tokens/s in bf16 against the same engine in fp32;
- a bf16-autocast CISPO step against the fp32 step on the same packed batch;
- |generator logprob − trainer logprob| over sampled tokens, FP32 head on both sides against the
  head in bf16 on both sides (the ScaleRL ablation); with vLLM installed, the same for the vLLM engine.
Prints one JSON object per figure and writes them all to `$OUT/gpu_check.json` when OUT is set.
`--allow-cpu --small` runs the same code on CPU in about a minute (a smoke test, not a measurement).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import torch

from trainer.engines.base import GenerationRequest, SamplingParams
from trainer.engines.torch_engine import TorchEngine
from trainer.fp32_head import token_logprobs
from trainer.losses import LossConfig
from trainer.policy import OptimConfig, PolicyTrainer, pack_samples

NEVER = 10**9  # a stop id outside the vocabulary: every sample runs to its budget
RESULTS: list[dict] = []


def emit(**fields) -> None:
    RESULTS.append(fields)
    print(json.dumps(fields), flush=True)


def build(small: bool, device: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    size = (
        {"hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 2, "num_attention_heads": 2}
        if small
        else {
            "hidden_size": 1024,
            "intermediate_size": 2816,
            "num_hidden_layers": 16,
            "num_attention_heads": 16,
        }
    )
    cfg = LlamaConfig(
        vocab_size=32000 if not small else 512,
        head_dim=64,
        num_key_value_heads=size["num_attention_heads"],
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        **size,
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).to(device).float().eval()


def generate(engine, n_prompts: int, samples: int, new_tokens: int, vocab: int) -> tuple[list, float]:
    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(4, vocab, (16,), generator=gen).tolist() for _ in range(n_prompts)]
    t0 = time.perf_counter()
    for i, p in enumerate(prompts):
        engine.submit(
            GenerationRequest(
                request_id=str(i),
                prompt_token_ids=p,
                samples_per_prompt=samples,
                sampling=SamplingParams(max_new_tokens=new_tokens, stop_token_ids=[NEVER]),
            )
        )
    groups = []
    while len(groups) < n_prompts:
        groups += engine.poll(1.0)
    wall = time.perf_counter() - t0
    return groups, sum(len(s.token_ids) for g in groups for s in g.samples) / wall


def mismatch(model, groups, fp32_head: bool, amp: torch.dtype | None) -> dict[str, float]:
    diffs = []
    with (
        torch.no_grad(),
        torch.autocast(
            "cuda", dtype=amp or torch.bfloat16, enabled=amp is not None and model.device.type == "cuda"
        ),
    ):
        for g in groups[:8]:
            for s in g.samples[:2]:
                ids = torch.tensor(g.request.prompt_token_ids + s.token_ids, device=model.device)
                lp = (
                    token_logprobs(model, ids, fp32_head=fp32_head)[len(g.request.prompt_token_ids) :]
                    .float()
                    .cpu()
                )
                diffs += (lp - torch.tensor(s.logprobs)).abs().tolist()
    return {"mean_abs": statistics.fmean(diffs), "max_abs": max(diffs), "tokens": len(diffs)}


def engine_checks(model, args, device: str) -> list:
    vocab = model.config.vocab_size
    out = {}
    for dtype in (torch.float32, torch.bfloat16):
        for fp32_head in (True, False):
            if dtype == torch.float32 and not fp32_head:
                continue
            eng = TorchEngine(
                model,
                eos_token_id=NEVER,
                device=device,
                dtype=dtype,
                max_slots=args.slots,
                max_seq_len=16 + args.new_tokens + 1,
                fp32_head=fp32_head,
            )
            groups, tps = generate(eng, args.prompts, args.samples, args.new_tokens, vocab)
            eng.close()
            out[(dtype, fp32_head)] = (groups, tps)
    base = out[(torch.float32, True)][1]
    emit(
        check="torch_engine_tokens_per_s",
        bf16=out[(torch.bfloat16, True)][1],
        fp32_baseline=base,
        ratio=out[(torch.bfloat16, True)][1] / base,
        slots=args.slots,
        new_tokens=args.new_tokens,
    )
    amp = torch.bfloat16 if device == "cuda" else None
    for fp32_head in (True, False):
        m = mismatch(model, out[(torch.bfloat16, fp32_head)][0], fp32_head, amp)
        emit(check="logprob_mismatch_torch_engine_bf16", fp32_head=fp32_head, **m)
    return out[(torch.bfloat16, True)][0]


def training_check(model, groups, device: str) -> None:
    samples = [(g, s) for g in groups for s in g.samples][:64]
    batch = pack_samples(
        prompt_ids=[g.request.prompt_token_ids for g, _ in samples],
        completion_ids=[s.token_ids for _, s in samples],
        gen_logprobs=[s.logprobs for _, s in samples],
        loss_masks=[s.loss_mask for _, s in samples],
        advantages=[(-1.0) ** i for i in range(len(samples))],
        group_ids=[i // 2 for i in range(len(samples))],
    )
    times = {}
    for precision in ("fp32", "bf16"):
        import copy

        trainer = PolicyTrainer(
            copy.deepcopy(model).train(), OptimConfig(precision=precision, lr=1e-6), LossConfig()
        )
        trainer.step(batch.to(device))  # warm-up (allocator, kernels)
        runs = []
        for _ in range(3):
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            trainer.step(batch.to(device))
            if device == "cuda":
                torch.cuda.synchronize()
            runs.append(time.perf_counter() - t0)
        times[precision] = statistics.median(runs)
    emit(
        check="training_step_s",
        bf16=times["bf16"],
        fp32_baseline=times["fp32"],
        ratio=times["bf16"] / times["fp32"],
        tokens=batch.num_tokens,
        bf16_tokens_per_s=batch.num_tokens / times["bf16"],
    )


def vllm_check(model, args) -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        emit(check="logprob_mismatch_vllm_bf16", skipped="vllm is not installed here")
        return
    from trainer.engines.vllm_engine import VLLMEngine, VLLMOptions

    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder, safe_serialization=True)
        eng = VLLMEngine(
            folder,
            eos_token_id=0,
            max_slots=args.slots,
            max_seq_len=16 + args.new_tokens + 1,
            dtype="bfloat16",
            options=VLLMOptions(enforce_eager=False),
        )
        try:
            groups, tps = generate(eng, args.prompts, args.samples, args.new_tokens, model.config.vocab_size)
        finally:
            eng.close()
    amp = torch.bfloat16 if model.device.type == "cuda" else None
    emit(
        check="logprob_mismatch_vllm_bf16",
        fp32_head=True,
        vllm_tokens_per_s=tps,
        **mismatch(model, groups, True, amp),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--allow-cpu", action="store_true", help="run on CPU (smoke test)")
    ap.add_argument("--small", action="store_true", help="tiny model and batch (smoke test)")
    ap.add_argument("--no-vllm", action="store_true")
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.allow_cpu:
        raise SystemExit("no CUDA device (pass --allow-cpu --small for a CPU smoke test)")
    args.prompts, args.samples, args.new_tokens, args.slots = (
        (4, 2, 16, 8) if args.small else (32, 8, 256, 256)
    )
    emit(
        check="device",
        device=torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        torch=torch.__version__,
    )
    model = build(args.small, device)
    groups = engine_checks(model, args, device)
    training_check(model, groups, device)
    if not args.no_vllm:
        vllm_check(model, args)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gpu_check.json"), "w") as fh:
            json.dump(RESULTS, fh, indent=2)


if __name__ == "__main__":
    main()
