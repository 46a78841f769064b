"""`scalerl train --dry-run`: what a run would train on and what a step costs, without loading the model.

Loads the data (`scalerl.trainer.run.data_sources.build_data`: a malformed file fails here, naming file, row and
field) and the tokenizer only (a `.gguf` model is converted once, as a real run would), renders every
prompt with the run's template and reports per domain: training / held-out problem counts, prompt-length
percentiles in tokens, how many prompts exceed the budget (prompt + completion budget >
`engine.max_seq_len`; a real run skips them), an example prompt as the model sees it; and per step:
samples, the completion budget and the most tokens a step can take. A domain with several sources gets
one line per source: its training problems, weight and share of the domain's draws.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.rollout.problems import DomainPool
from scalerl.trainer.rollout.prompts import completion_budget, prepare_prompts, run_tokenizer
from scalerl.trainer.run.data_sources import build_data, domain_weights, effective_sources


def dry_run_report(cfg: TrainConfig) -> str:
    pools = build_data(cfg)
    codec, _, _ = prepare_prompts(cfg, run_tokenizer(cfg), pools, drop=False)
    encode = codec.problem_encoder
    budget = completion_budget(cfg, codec)
    p = cfg.pipeline
    lines = [f"model: {cfg.model or 'built-in tiny model'}   template: {'on' if encode.templated else 'off'}   "
             f"stop tokens: {codec.stop_token_ids}",
             "sources: " + "; ".join(f"{s.domain} {s.kind} {','.join(s.files) or f'level {s.level}'} "
                                      f"w={s.weight:g}" for s in effective_sources(cfg)),
             f"domain weights: {domain_weights(cfg)}"]
    mean_prompt = []
    for dom, pool in pools.items():
        lengths = np.array([len(encode(r)) for r in pool.train + pool.holdout])
        over = int((lengths + budget > cfg.engine.max_seq_len).sum())
        q = np.percentile(lengths, [50, 90, 99]).round().astype(int)
        lines.append(f"{dom}: {len(pool.train)} training, {len(pool.holdout)} held-out problems; prompt tokens "
                     f"p50 {q[0]} p90 {q[1]} p99 {q[2]} max {lengths.max()}; {over} over the budget "
                     f"(prompt + {budget} > engine.max_seq_len {cfg.engine.max_seq_len}) would be skipped")
        if len(pool.source_weights) > 1:
            lines.append("  " + _source_mix_line(pool))
        example = encode.text(pool.train[0])
        lines.append(f"  example prompt: {example[-400:]!r}")
        mean_prompt.append(float(lengths.mean()))
    samples = p.prompts_per_step * p.samples_per_prompt
    lines.append(f"per step: {p.prompts_per_step} prompts x {p.samples_per_prompt} samples = {samples} samples; "
                 f"completion budget {budget} tokens; at most {samples * budget} generated tokens, "
                 f"~{round(samples * (np.mean(mean_prompt) + budget))} tokens through the trainer")
    from scalerl.trainer.memory.preflight import plan_report

    lines.append(plan_report(cfg))
    return "\n".join(lines)


def _source_mix_line(pool: DomainPool) -> str:
    """`a.parquet: 40 training, weight 3 (75 % of draws); ...`: the share the sampler gives each source."""
    counts = Counter(pool.source_of.get(r.prompt_id) for r in pool.train)
    live = sum(w for s, w in pool.source_weights.items() if w > 0 and counts[s])
    return "; ".join(f"{s}: {counts[s]} training, weight {w:g} ({100 * w / live if live and counts[s] else 0:.0f} % "
                     f"of draws)" for s, w in pool.source_weights.items())
