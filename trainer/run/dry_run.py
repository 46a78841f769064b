"""`scalerl train --dry-run`: what a run would train on and what a step costs, without loading the model.

Loads the data (`scalerl.trainer.run.data_sources.build_data`: a malformed file fails here, naming file, row and
field) and the tokenizer only (a `.gguf` model is converted once, as a real run would), renders every
prompt with the run's template and reports per domain: training / held-out problem counts, prompt-length
percentiles in tokens, how many prompts exceed the budget (prompt + completion budget >
`engine.max_seq_len`; a real run skips them; in a domain played as episodes a training problem's prompt
is its environment's first observation), an example prompt as the model sees it (its last
`EXAMPLE_CHARS` characters, the cut marked `…`); and per step: samples, the completion budget and the
most tokens a step can take. A domain with several sources gets one line per source: its training
problems, weight and share of the domain's draws. Then the memory plan (`scalerl.trainer.memory.preflight`).

A model folder without a tokenizer (e.g. only `config.json`, enough for the memory plan) gets the counts
and the plan, and a line saying the prompt statistics were skipped and why; a tokenizer that cannot be
loaded, or that encodes every prompt to nothing, is reported the same way. `DryRunReport.fits` is False
when the memory plan needs more than a device has (the command then exits 2, as the run would).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field
from scalerl.env.contracts.records import Strict
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.rollout.problems import DomainPool
from scalerl.trainer.rollout.prompts import (
    ProblemPrompts,
    completion_budget,
    first_prompt,
    prepare_prompts,
    run_tokenizer,
)
from scalerl.trainer.run.data_sources import build_data, domain_weights, effective_sources

EXAMPLE_CHARS = 400  # the end of a prompt shows the template's last turn and the generation prompt
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


class DryRunReport(Strict):
    text: str
    fits: bool = Field(description="False when the memory plan needs more than a device has")


def dry_run_report(cfg: TrainConfig) -> DryRunReport:
    from scalerl.trainer.memory.preflight import plan_for, plan_report

    pools = build_data(cfg)
    encode, budget, why_not = _prompt_encoder(cfg, pools)
    model = f"model: {cfg.model or 'built-in tiny model'}"
    if encode is not None:
        model += f"   template: {'on' if encode.templated else 'off'}   stop tokens: {encode.codec.stop_token_ids}"
    lines = [model, "sources: " + "; ".join(f"{s.domain} {s.kind} {','.join(s.files) or f'level {s.level}'} "
                                            f"w={s.weight:g}" for s in effective_sources(cfg)),
             f"domain weights: {domain_weights(cfg)}"]
    if encode is not None:
        lines += _prompt_lines(cfg, pools, encode, budget)
    else:
        lines += [f"{dom}: {len(pool.train)} training, {len(pool.holdout)} held-out problems"
                  for dom, pool in pools.items()]
        lines.append(f"prompt statistics skipped: {why_not}")
    plan, _ = plan_for(cfg.plan_inputs())
    lines.append(plan_report(cfg.plan_inputs()))
    return DryRunReport(text="\n".join(lines), fits=plan is None or not plan.overruns())


def _prompt_encoder(cfg: TrainConfig, pools: dict[str, DomainPool]) -> tuple[ProblemPrompts | None, int, str]:
    """(the run's prompt encoder, completion budget, "") or (None, 0, why the prompts cannot be measured)."""
    tokenizer, why_not = load_tokenizer_or_reason(cfg)
    if tokenizer is None:
        return None, 0, why_not
    codec, _, _ = prepare_prompts(cfg, tokenizer, pools, drop=False)
    encode = codec.problem_encoder
    if not any(len(encode(r)) for pool in pools.values() for r in pool.train + pool.holdout):
        return None, 0, f"the tokenizer of {cfg.model} encodes every prompt to 0 tokens"
    return encode, completion_budget(cfg, codec), ""


def load_tokenizer_or_reason(cfg: TrainConfig) -> tuple[Any, str]:
    """(the run's tokenizer, "") or (None, why there is none): a model folder without tokenizer files, or a
    tokenizer `transformers` cannot build."""
    folder = Path(cfg.model) if cfg.model else None
    if folder is not None and folder.is_dir() and not any((folder / f).is_file() for f in TOKENIZER_FILES):
        return None, f"no tokenizer in {folder} (none of {', '.join(TOKENIZER_FILES)})"
    try:
        return run_tokenizer(cfg), ""
    except (OSError, ValueError) as exc:
        return None, f"the tokenizer of {cfg.model} cannot be loaded: {' '.join(str(exc).split())[:300]}"


def _prompt_lines(cfg: TrainConfig, pools: dict[str, DomainPool], encode: ProblemPrompts, budget: int) -> list[str]:
    """Per domain: counts, prompt lengths, prompts over the budget, an example; then the cost of a step."""
    lines, mean_prompt = [], []
    first = first_prompt(cfg, encode)  # a domain played as episodes: its environment's first observation
    for dom, pool in pools.items():
        lengths = np.array([len(first(r)) for r in pool.train] + [len(encode(r)) for r in pool.holdout])
        over = int((lengths + budget > cfg.engine.max_seq_len).sum())
        q = np.percentile(lengths, [50, 90, 99]).round().astype(int)
        lines.append(f"{dom}: {len(pool.train)} training, {len(pool.holdout)} held-out problems; prompt tokens "
                     f"p50 {q[0]} p90 {q[1]} p99 {q[2]} max {lengths.max()}; {over} over the budget "
                     f"(prompt + {budget} > engine.max_seq_len {cfg.engine.max_seq_len}) would be skipped")
        if len(pool.source_weights) > 1:
            lines.append("  " + _source_mix_line(pool))
        lines.append("  " + example_line(encode.render(first(pool.train[0]))))
        mean_prompt.append(float(lengths.mean()))
    p = cfg.pipeline
    samples = p.prompts_per_step * p.samples_per_prompt
    lines.append(f"per step: {p.prompts_per_step} prompts x {p.samples_per_prompt} samples = {samples} samples; "
                 f"completion budget {budget} tokens; at most {samples * budget} generated tokens, "
                 f"~{round(samples * (np.mean(mean_prompt) + budget))} tokens through the trainer")
    return lines


def example_line(text: str) -> str:
    """`example prompt: '...'`, or its last `EXAMPLE_CHARS` characters with the cut marked by a leading `…`."""
    if len(text) <= EXAMPLE_CHARS:
        return f"example prompt: {text!r}"
    return f"example prompt (last {EXAMPLE_CHARS} of {len(text)} characters): {'…' + text[-EXAMPLE_CHARS:]!r}"


def _source_mix_line(pool: DomainPool) -> str:
    """`a.parquet: 40 training, weight 3 (75 % of draws); ...`: the share the sampler gives each source."""
    counts = Counter(pool.source_of.get(r.prompt_id) for r in pool.train)
    live = sum(w for s, w in pool.source_weights.items() if w > 0 and counts[s])
    return "; ".join(f"{s}: {counts[s]} training, weight {w:g} ({100 * w / live if live and counts[s] else 0:.0f} % "
                     f"of draws)" for s, w in pool.source_weights.items())
