"""GPU check: torch-engine tokens/s, a bf16 training step, and the FP32-head logprob mismatch.

Run through `benchmarks/gpu_check.sh` on a CUDA machine (no registry needed: nothing downloads; the
model is a random Llama built from a config). Each figure has its baseline from the same process:
- engine tokens/s in bf16 against the same engine in fp32;
- a bf16-autocast CISPO step against the fp32 step on the same packed batch;
- |generator logprob − trainer logprob| over sampled tokens, FP32 head on both sides against the
  head in bf16 on both sides (the ScaleRL ablation); with vLLM installed, the same for the vLLM engine.
- With vLLM installed, each vLLM run pushes the whole state dict with a changed LM head (version 1)
  mid-generation and reports the push time, how many samples span both versions, and the mismatch of
  every token against the trainer's FP32-head recomputation under the weights of its own version
  (`max_abs_v0`/`max_abs_v1`; a transfer that loaded wrong bytes shows in `max_abs_v1`):
  `logprob_mismatch_vllm_bf16` with `weight_transfer="file"` (1 GPU), `vllm_weight_transfer_nccl`
  with vLLM's NCCL transfer engine (needs a second GPU for the sending rank: NCCL rejects two ranks
  on one GPU; skipped with the reason otherwise). `--vllm-only` runs just these two.
Prints one JSON object per figure and writes them all to `$OUT/gpu_check.json` when OUT is set.
`--allow-cpu --small` runs the same code on CPU in about a minute (a smoke test, not a measurement).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import tempfile
import time

import torch
from scalerl.trainer.core.fp32_head import token_logprobs
from scalerl.trainer.core.losses import LossConfig
from scalerl.trainer.core.update import OptimConfig, pack_samples
from scalerl.trainer.distributed.leader import RankGroup
from scalerl.trainer.engines.base import GenerationRequest, SamplingParams
from scalerl.trainer.engines.torch_engine import TorchEngine

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


def generate(
    engine, n_prompts: int, samples: int, new_tokens: int, vocab: int, push=None
) -> tuple[list, float]:
    """`push()` (if given) runs once a quarter of the tokens are sampled, while the rest are in flight."""
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
    if push is not None:
        while engine.stats.sampled_tokens < n_prompts * samples * new_tokens // 4:
            if time.perf_counter() - t0 > 120:
                raise RuntimeError("no tokens after 120 s: the engine is stuck")
            time.sleep(0.002)
        push()
    while len(groups) < n_prompts:
        groups += engine.poll(1.0)
    wall = time.perf_counter() - t0
    return groups, sum(len(s.token_ids) for g in groups for s in g.samples) / wall


def mismatch(models: dict, groups, fp32_head: bool, amp: torch.dtype | None) -> dict[str, float]:
    """Each token against the trainer's recomputation under the model of its policy version."""
    diffs: dict[int, list[float]] = {v: [] for v in models}
    device = next(iter(models.values())).device
    with (
        torch.no_grad(),
        torch.autocast(
            "cuda", dtype=amp or torch.bfloat16, enabled=amp is not None and device.type == "cuda"
        ),
    ):
        for g in groups[:8]:
            for s in g.samples[:2]:
                n = len(g.request.prompt_token_ids)
                ids = torch.tensor(g.request.prompt_token_ids + s.token_ids, device=device)
                lp = {
                    v: token_logprobs(models[v], ids, fp32_head=fp32_head)[n:].float().cpu()
                    for v in set(s.policy_versions)
                }
                for i, (v, got) in enumerate(zip(s.policy_versions, s.logprobs, strict=True)):
                    diffs[v].append(abs(lp[v][i].item() - got))
    every = [d for v in diffs.values() for d in v]
    out = {"mean_abs": statistics.fmean(every), "max_abs": max(every), "tokens": len(every)}
    if len(models) > 1:
        out |= {f"max_abs_v{v}": max(d, default=float("nan")) for v, d in diffs.items()}
    return out


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
        m = mismatch({0: model}, out[(torch.bfloat16, fp32_head)][0], fp32_head, amp)
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
        # the loop's update path: one trainer rank in this process
        group = RankGroup.single(copy.deepcopy(model).train(), OptimConfig(precision=precision, lr=1e-6), LossConfig())
        group.step(batch)  # warm-up (allocator, kernels)
        runs = []
        for _ in range(3):
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            group.step(batch)
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


def perturbed(model):
    """Version 1: noise on the (untied) LM head only. The body, hence the KV cache that running requests
    keep across the push, is unchanged, so tokens after the push must match a full recomputation
    under version 1 (a body change would make them depend on the old KV: not comparable)."""
    new = copy.deepcopy(model)
    head = new.lm_head.weight
    gen = torch.Generator(device=head.device).manual_seed(2)
    with torch.no_grad():
        head.add_(torch.randn(head.shape, generator=gen, device=head.device, dtype=head.dtype), alpha=0.02)
    return new


def vllm_push_check(model, args, check: str, **options) -> None:
    """Start the vLLM engine (`options` → `VLLMOptions`), generate, push version 1 mid-generation."""
    from scalerl.trainer.engines.engine_config import VLLMOptions
    from scalerl.trainer.engines.vllm_engine import VLLMEngine

    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # vLLM sizes its KV cache from the memory free at start
    new = perturbed(model)
    push_s: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder, safe_serialization=True)
        t0 = time.perf_counter()
        eng = VLLMEngine(
            folder,
            eos_token_id=0,
            max_slots=args.slots,
            max_seq_len=16 + args.new_tokens + 1,
            dtype="bfloat16",
            options=VLLMOptions(gpu_memory_utilization=0.5, **options),
        )
        start_s = time.perf_counter() - t0

        def push() -> None:
            t = time.perf_counter()
            eng.update_weights(new.state_dict(), 1)
            push_s.append(time.perf_counter() - t)

        try:
            groups, tps = generate(
                eng, args.prompts, args.samples, args.new_tokens, model.config.vocab_size, push
            )
        finally:
            eng.close()
    samples = [s for g in groups for s in g.samples]
    amp = torch.bfloat16 if model.device.type == "cuda" else None
    emit(
        check=check,
        fp32_head=True,
        **options,
        engine_start_s=start_s,
        push_s=push_s[0],
        samples_spanning_push=sum(len(set(s.policy_versions)) == 2 for s in samples),
        samples=len(samples),
        vllm_tokens_per_s=tps,
        **mismatch({0: model, 1: new}, groups, True, amp),
    )


def vllm_checks(model, args) -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        for check in ("logprob_mismatch_vllm_bf16", "vllm_weight_transfer_nccl"):
            emit(check=check, skipped="vllm is not installed here")
        return
    # NCCL first: it is the figure that needs a multi-GPU machine.
    if torch.cuda.device_count() < 2:
        emit(
            check="vllm_weight_transfer_nccl",
            skipped=f"needs 2 GPUs (vLLM's worker + the sending rank; NCCL rejects two ranks on one "
            f"GPU), {torch.cuda.device_count()} visible",
        )
    else:
        vllm_push_check(model, args, "vllm_weight_transfer_nccl", weight_transfer="nccl", enforce_eager=True)
    vllm_push_check(model, args, "logprob_mismatch_vllm_bf16", weight_transfer="file", enforce_eager=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--allow-cpu", action="store_true", help="run on CPU (smoke test)")
    ap.add_argument("--small", action="store_true", help="tiny model and batch (smoke test)")
    ap.add_argument("--no-vllm", action="store_true")
    ap.add_argument("--vllm-only", action="store_true", help="only the vLLM checks (weight pushes included)")
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
    if not args.vllm_only:
        groups = engine_checks(model, args, device)
        training_check(model, groups, device)
    if not args.no_vllm:
        vllm_checks(model, args)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gpu_check.json"), "w") as fh:
            json.dump(RESULTS, fh, indent=2)


if __name__ == "__main__":
    main()
