"""Build (or resume) everything a training run needs; the loop itself is `scalerl.trainer.run.loop`.

A run folder holds: `config.yaml` (resolved), `metrics.jsonl`, `ledger.duckdb`, `checkpoints/`
(each with the model, optimizer state and a copy of the ledger, so ledger and sampler resume
consistently with the weights), `curves/`, `summary.json`.

Fail-fast checks (before any work): unknown domain and k < 0 are config errors (`TrainConfig`); a
`--model` that is neither a folder nor a hub id in the local Hugging Face cache
(`scalerl.trainer.config.resolve.check_model_path`); a run folder that already holds a run (use
`--resume`); `--resume` on a folder without a checkpoint; `lora.enabled` with several trainer ranks;
`curriculum.zero_variance.mode=refill` with Ray.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from scalerl.curriculum.policy import CurriculumPolicy, policy_for
from scalerl.curriculum.sampler import Sampler
from scalerl.env.contracts.config_loader import ConfigError, write_resolved
from scalerl.trainer.config.resolve import check_model_path
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.core.checkpoint import latest_checkpoint, load_model_weights
from scalerl.trainer.core.lora_config import pushes_adapters, vllm_lora_rank, vllm_target_modules
from scalerl.trainer.distributed.components import make_components
from scalerl.trainer.distributed.leader import start_ranks
from scalerl.trainer.engines.device import resolve_device
from scalerl.trainer.rollout.episodes import EpisodeDriver
from scalerl.trainer.rollout.problems import DomainPool
from scalerl.trainer.rollout.prompts import prepare_prompts, run_tokenizer
from scalerl.trainer.rollout.runtime import LocalRuntime
from scalerl.trainer.rollout.sample_log import RolloutLog
from scalerl.trainer.rollout.worker import BatchDrawer, Rollouts
from scalerl.trainer.run.compute import COUNTERS, ComputeClock, FlopModel
from scalerl.trainer.run.data_sources import build_data, domain_weights, warm_start_problems
from scalerl.trainer.run.log import RunLog, truncate_after
from scalerl.trainer.run.state import Run, RunState
from scalerl.trainer.tiny.model import CharTokenizer, build_tiny_model

log = logging.getLogger(__name__)
LEDGER = "ledger.duckdb"


def check_lora(cfg: TrainConfig) -> None:
    """LoRA runs on one trainer rank (the torch engine receives merged weights, vLLM the adapters unless
    `lora.vllm_adapters=false`); several trainer ranks, and adapters vLLM cannot serve, are refused."""
    if not cfg.lora.enabled:
        return
    if cfg.trainer_ranks.count > 1:
        raise ConfigError("lora.enabled with trainer_ranks.count > 1 is not supported yet (FSDP2 sharding of an "
                          "adapted model): use one trainer rank")
    if pushes_adapters(cfg.lora, cfg.engine.name):
        try:
            vllm_lora_rank(cfg.lora), vllm_target_modules(cfg.lora)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if cfg.engine.vllm.weight_transfer != "file":
            raise ConfigError("lora.vllm_adapters with engine.vllm.weight_transfer=nccl: the adapters go through "
                              "files (weight_transfer=file), or set lora.vllm_adapters=false")


def sampler_policy(cfg: TrainConfig) -> CurriculumPolicy | None:
    """The sampler's strategy hook, or None under ScaleRL's defaults (the sampler's plain walk); refill
    (`scalerl.trainer.run.zero_variance`) needs the in-process runtime."""
    cur = cfg.curriculum
    if cur.zero_variance.mode == "refill" and cfg.ray.enabled:
        raise ConfigError("curriculum.zero_variance.mode=refill needs the in-process runtime (ray.enabled=false)")
    return policy_for(cur, cfg.pipeline.seed)


def load_policy(cfg: TrainConfig, pools: dict[str, DomainPool]) -> tuple[Any, Any]:
    """(model, tokenizer): the warm-started tiny model, or `cfg.model` from disk/cache."""
    if cfg.model is None:
        tok = CharTokenizer()
        model = build_tiny_model(cfg.tiny, tok)
        if cfg.warm_start.enabled:
            from scalerl.trainer.tiny.warm_start import warm_start

            threads = torch.get_num_threads()
            torch.set_num_threads(os.cpu_count() or 1)  # nothing else runs yet: use every core
            try:
                learned = warm_start_problems(cfg, pools)
                folder = warm_start(cfg.tiny, cfg.warm_start, learned)
                if cfg.environments and cfg.warm_start.episodes.enabled:
                    folder = _episode_warm_start(cfg, pools, folder, learned)
            finally:
                torch.set_num_threads(threads)
            load_model_weights(folder, model)
        return model, tok
    from scalerl.trainer.engines.model_loading import load_hf_policy

    return load_hf_policy(cfg.model)  # a folder, cached hub id, .gguf file (converted once) or alias


def _episode_warm_start(cfg: TrainConfig, pools: dict[str, DomainPool], base: Path, learned: list) -> Path:
    """The tiny model's second warm start: traces of each environment the run plays, one phase after another."""
    from scalerl.env.contracts.episodes import environment
    from scalerl.trainer.tiny.episode_warm_start import episode_warm_start

    for env in cfg.environments:
        spec = environment(env)
        base = episode_warm_start(base, cfg.tiny, cfg.warm_start, env, cfg.episode_limits or spec.limits,
                                  pools[spec.domain].train, learned, cfg.verifier)
    return base


def prepare_folder(cfg: TrainConfig, out: Path, resume: bool) -> Path | None:
    """Checks the folder; on resume restores the checkpoint's ledger copy and returns the checkpoint."""
    out.mkdir(parents=True, exist_ok=True)
    if not resume:
        if (out / "metrics.jsonl").exists() or (out / LEDGER).exists():
            raise ConfigError(f"{out} already holds a run; pass --resume {out} to continue it, or another --out")
        write_resolved(cfg, out / "config.yaml")
        return None
    ckpt = latest_checkpoint(out / "checkpoints")
    if ckpt is None:
        raise ConfigError(f"--resume {out}: no checkpoint under {out / 'checkpoints'}")
    if not (ckpt / LEDGER).is_file():  # never delete the live ledger for a checkpoint that has none
        raise ConfigError(f"--resume {out}: checkpoint {ckpt} holds no {LEDGER}; the live ledger is left as it is")
    for suffix in ("", ".wal"):
        Path(str(out / LEDGER) + suffix).unlink(missing_ok=True)
    shutil.copy2(ckpt / LEDGER, out / LEDGER)
    return ckpt


def setup_run(cfg: TrainConfig, out: Path, *, resume: bool = False) -> Run:
    check_model_path(cfg.model)
    check_lora(cfg)
    policy = sampler_policy(cfg)
    device = resolve_device(cfg.engine.device)
    torch.set_num_threads(cfg.pipeline.torch_threads)
    ckpt = prepare_folder(cfg, out, resume)
    pools = build_data(cfg)  # a malformed data file stops the run here, before the model loads
    # too-long prompts leave the pools before the model loads (and before the tiny model's warm start)
    codec, pools, skipped = prepare_prompts(cfg, run_tokenizer(cfg), pools)
    model, _ = load_policy(cfg, pools)
    model.to(device)
    ranks = start_ranks(model, device, cfg.trainer_ranks, cfg.ray, optim=cfg.optim, loss=cfg.loss, lora=cfg.lora,
                        temperature=cfg.engine.temperature, torch_threads=cfg.pipeline.torch_threads, out=out)
    trainer = ranks.trainer
    extra: dict[str, Any] = {}
    if ckpt is not None:
        extra = ranks.load_checkpoint(ckpt).get("extra", {})
        truncate_after(out / "metrics.jsonl", trainer.step_count)
        log.info("resumed from %s at step %d", ckpt, trainer.step_count)
    spec = cfg.engine_spec()
    parts = make_components(cfg.ray, spec, out)  # in this process, or Ray actors
    ledger = parts.ledger(out / LEDGER, cfg.curriculum.retirement, cfg.ledger)
    sampler = build_sampler(cfg, pools, ledger, policy, extra.get("sampler"))
    verifier = parts.verifier(cfg.verifier)
    draw = BatchDrawer(sampler, cfg.pipeline.prompts_per_step, cfg.curriculum.stages)
    draw.load_state(extra.get("sampler_buffer"))
    rollouts = Rollouts(cfg, codec, draw, verifier, seed=cfg.pipeline.seed, stage=draw.stage)
    # vLLM serving the adapters gets the adapted model: base weights in its folder, adapters through LoRA
    engine = parts.engine(trainer.model if spec.pushes_adapters else model, codec.eos_token_id, device=device,
                          policy_version=trainer.policy_version, seed=cfg.pipeline.seed + trainer.step_count)
    if cfg.environments:  # the domains played as episodes go through the episode driver
        # an environment's step runs a sandboxed program: as many at once as the sandbox has slots
        engine = EpisodeDriver(engine, codec, max_seq_len=cfg.engine.max_seq_len, verifier_config=cfg.verifier,
                               limits=cfg.episode_limits, step_threads=cfg.verifier.code.slots)
    p = cfg.pipeline
    runtime = LocalRuntime(engine, rollouts, mode=p.mode, k=p.k, prompts_per_step=p.prompts_per_step,
                           first_group_id=int(extra.get("next_group_id", 0)))
    return Run(
        cfg=cfg, out=out, model=model, codec=codec, ranks=ranks, runtime=runtime, rollouts=rollouts, ledger=ledger,
        sampler=sampler, verifier=verifier, pools=pools, device=device,
        log=RunLog(out, cfg.logging, total_steps=p.max_steps, config_dict=cfg.model_dump(mode="json")),
        clock=ComputeClock(FlopModel.of(model), **{k: float(v) for k, v in extra.items() if k in COUNTERS}),
        state=RunState(elapsed_s=float(extra.get("elapsed_s", 0.0))),
        samples=RolloutLog(out, cfg.rollout_log, skipped=skipped, resume_step=trainer.step_count if ckpt else None,
                           source_of=source_labels_of(pools)))


def source_labels_of(pools: dict[str, DomainPool]) -> dict[str, str]:
    """Every problem's source label (`scalerl.trainer.run.data_sources.source_labels`), by prompt id."""
    return {pid: label for pool in pools.values() for pid, label in pool.source_of.items()}


def build_sampler(cfg: TrainConfig, pools: dict[str, DomainPool], ledger: Any, policy: CurriculumPolicy | None,
                  stored: dict[str, Any] | None) -> Sampler:
    """The run's sampler over every problem (held-out ones are never drawn), the ledger's problems upserted.
    `stored` (the checkpoint's sampler state, taken with the next group id) replays the draws exactly;
    without it the ledger's own state resumes the sampler at most once per epoch."""
    problems = [p for pool in pools.values() for p in pool.train] + [p for pool in pools.values() for p in pool.holdout]
    ledger.upsert_problems(problems)
    sampler = Sampler(problems, weights=domain_weights(cfg), seed=cfg.pipeline.seed, ledger=ledger,
                      holdout_ids={p.prompt_id for pool in pools.values() for p in pool.holdout}, policy=policy,
                      resume=stored is None, sources={dom: pool.source_weights for dom, pool in pools.items()},
                      source_of=source_labels_of(pools))
    if stored is not None:
        sampler.resume_from(stored)
    return sampler
