"""CISPO training step vs a plain next-token NLL step on the same tiny model and packed batch.

Both steps run forward, backward, grad-norm clip and AdamW on the same Llama (built from config, no
download) and the same packed batch with per-sequence positions. The CISPO step is `RankGroup.step`
of one rank, the loop's update path (fp32 head, token logprobs, prompt-aggregated CISPO loss); the
baseline is the model's own logits + `cross_entropy` over the completion tokens. Steps alternate so machine noise
hits both alike; the median of the per-round ratios is reported (and the ratio of medians).
Target: ≤ 1.15×.

    .venv/bin/python benchmarks/bench_loss.py            # default: 64 samples, ~2.6k tokens
    .venv/bin/python benchmarks/bench_loss.py --samples 256 --repeats 10
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
from scalerl.trainer.core.fp32_head import pad_sequences, resolve_layout
from scalerl.trainer.core.losses import LossConfig
from scalerl.trainer.core.update import OptimConfig, PackedBatch, build_optimizer, pack_samples
from scalerl.trainer.distributed.leader import RankGroup
from transformers import LlamaConfig, LlamaForCausalLM

TARGET_RATIO = 1.15


def tiny_model(vocab: int, seed: int) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=128,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=32,
        max_position_embeddings=512,
    )
    return LlamaForCausalLM(cfg)


def make_batch(n_samples: int, vocab: int, seed: int) -> PackedBatch:
    g = torch.Generator().manual_seed(seed)
    prompts, completions = [], []
    for _ in range(n_samples):
        prompts.append(
            torch.randint(0, vocab, (int(torch.randint(12, 24, (1,), generator=g)),), generator=g).tolist()
        )
        completions.append(
            torch.randint(0, vocab, (int(torch.randint(12, 36, (1,), generator=g)),), generator=g).tolist()
        )
    gen = [(-torch.rand(len(c), generator=g) * 4).tolist() for c in completions]
    adv = (torch.randn(n_samples, generator=g)).tolist()
    return pack_samples(
        prompts,
        completions,
        gen,
        [[1] * len(c) for c in completions],
        adv,
        [i // 8 for i in range(n_samples)],
    )


class NLLStep:
    """The baseline: plain next-token NLL over completion tokens, same optimizer and clipping."""

    def __init__(self, model: torch.nn.Module, cfg: OptimConfig) -> None:
        self.model, self.cfg = model, cfg
        self.optimizer, self.scheduler = build_optimizer(model, cfg)
        self.layout = resolve_layout(model, cfg.attention_layout)

    def _logits(self, batch: PackedBatch) -> torch.Tensor:
        """The model's own forward, in the same attention layout as the CISPO step (no KV cache:
        with one, Hugging Face ignores the packed-sequence boundaries)."""
        if self.layout == "packed":
            return self.model(
                input_ids=batch.input_ids[None], position_ids=batch.position_ids[None], use_cache=False
            ).logits[0]
        ids, pos, mask = pad_sequences(batch.input_ids, batch.position_ids)
        return self.model(
            input_ids=ids, attention_mask=mask.long(), position_ids=pos, use_cache=False
        ).logits[mask]

    def step(self, batch: PackedBatch) -> float:
        self.model.train()
        logits = self._logits(batch)
        mask = batch.loss_mask[1:]
        loss = F.cross_entropy(logits[:-1][mask].float(), batch.input_ids[1:][mask])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())


def run(samples: int, repeats: int, vocab: int, seed: int, layout: str = "auto") -> dict:
    batch = make_batch(samples, vocab, seed)
    cfg = OptimConfig(lr=1e-4, warmup_steps=0, micro_batch_tokens=batch.num_tokens, attention_layout=layout)
    cispo = RankGroup.single(tiny_model(vocab, seed), cfg, LossConfig())
    nll = NLLStep(tiny_model(vocab, seed), cfg)
    times: dict[str, list[float]] = {"cispo": [], "nll": []}
    for i in range(repeats + 1):
        for name, fn in (("cispo", cispo.step), ("nll", nll.step))[:: 1 if i % 2 else -1]:
            start = time.perf_counter()
            fn(batch)
            if i > 0:  # the first round warms up allocators and kernels
                times[name].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    # Paired ratios (the two steps of one round ran back to back) resist the load drifting over the run.
    paired = [c / n for c, n in zip(times["cispo"], times["nll"])]
    return {
        "layout": nll.layout,
        "samples": samples,
        "tokens": batch.num_tokens,
        "vocab": vocab,
        "repeats": repeats,
        "threads": torch.get_num_threads(),
        "cispo_step_s": med["cispo"],
        "nll_step_s": med["nll"],
        "ratio": statistics.median(paired),
        "ratio_of_medians": med["cispo"] / med["nll"],
        "ratio_min": min(paired),
        "ratio_max": max(paired),
        "target": TARGET_RATIO,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layout", choices=["auto", "packed", "padded"], default="auto")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    result = run(args.samples, args.repeats, args.vocab, args.seed, args.layout)
    verdict = "within" if result["ratio"] <= TARGET_RATIO else "ABOVE"
    print(
        f"CISPO step {result['cispo_step_s'] * 1e3:.1f} ms vs NLL step {result['nll_step_s'] * 1e3:.1f} ms "
        f"({result['tokens']} tokens): ratio {result['ratio']:.3f}x, {verdict} target {TARGET_RATIO}x"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
