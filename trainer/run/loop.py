"""The ScaleRL training loop over PipelineRL-k: read `train` top to bottom, one named phase per line.

Generation never stops (the runtime's feeder and engine threads); the loop takes scored groups
under the lag rule (`scalerl.trainer.rollout.messages`), records every attempt in the ledger, drops zero-variance
groups, lets the ledger retire prompts at pass rate ≥ 0.9 (no-positive resampling), computes
group-centred, batch-normalized advantages, takes one CISPO step with prompt-level aggregation, and
pushes the new weights in flight.

Departures from the paper, all deliberate:
- A step whose groups were all dropped by the zero-variance filter still advances the policy
  version (an optimizer step with no gradient: AdamW leaves the weights unchanged), so admission
  and the lag rule keep moving; it is logged with `effective_batch_fraction` 0.
- Truncated samples (still unfinished after the interruption's answer budget) are loss-masked and
  counted in `truncation_rate` (`scalerl.trainer.core.length_control.training_loss_mask`), with reward as scored.
- One trainer process and one engine (the single-machine default); `--trainer-ranks N` adds
  data-parallel trainer ranks with this process as rank 0 (`scalerl.trainer.distributed.leader`), and Ray
  actors replace the runtime for many (`scalerl.trainer.distributed`; `train_in_ray` runs this loop
  inside a Ray trainer actor).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Collection
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scalerl.env.contracts.records import Verdict
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.core.advantages import compute_advantages
from scalerl.trainer.core.checkpoint import prune_checkpoints, step_folder
from scalerl.trainer.core.length_control import length_metrics, training_loss_mask
from scalerl.trainer.core.lora import adapter_state_dict
from scalerl.trainer.core.lora_config import pushes_adapters
from scalerl.trainer.core.update import pack_samples
from scalerl.trainer.distributed.ray_launch import run_in_ray
from scalerl.trainer.rollout.episodes import episode_metrics
from scalerl.trainer.rollout.messages import RolloutGroup
from scalerl.trainer.run.ledger_readers import LedgerReaders
from scalerl.trainer.run.log import devices_in_use
from scalerl.trainer.run.setup import LEDGER, Run, setup_run
from scalerl.trainer.run.validation import evaluate, validation_engine
from scalerl.trainer.run.zero_variance import curriculum_metrics, filter_zero_variance, refill_groups
from scalerl.verifiers.second_opinion import ACCEPTS, REJECTS

log = logging.getLogger(__name__)
TAKE_TIMEOUT_S = 600.0


def train(cfg: TrainConfig, out: str | Path, *, resume: bool = False) -> dict[str, Any]:
    """Run (or resume) training into the folder `out`; returns the summary (also in summary.json)."""
    run = setup_run(cfg, Path(out), resume=resume)
    readers = None
    try:
        readers = LedgerReaders(run.ledger, run.out, LEDGER)  # SQL on the ledger while this process holds it
        run.runtime.start(run.trainer.policy_version)
        if run.step == 0 and cfg.validation.enabled:
            validate(run)
        t_start = time.monotonic() - run.state.elapsed_s
        run.log.announce(cfg.pipeline)
        while (stopped_by := stop_reason(run, t_start)) is None:
            t0 = time.perf_counter()
            groups = sample_groups(run)
            groups += refill_groups(run, groups)  # zero_variance.mode=refill only
            record_attempts(run, groups)
            kept, zero_var_ids = filter_zero_variance(run, groups)
            advantages, adv_metrics = group_advantages(run, kept, zero_var_ids)
            lag, step_metrics = policy_step(run, kept, advantages)
            push_weights(run)
            run.state.elapsed_s = time.monotonic() - t_start
            cur_metrics = curriculum_metrics(run, groups, kept)
            log_step(run, groups, kept, len(zero_var_ids), lag, {**adv_metrics, **step_metrics, **cur_metrics}, t0)
            readers.after_step()
            if cfg.validation.enabled and run.step % cfg.validation.every_steps == 0:
                validate(run)
            if run.step % cfg.checkpoint.every_steps == 0:
                checkpoint(run)
        return finish(run, stopped_by)
    finally:
        run.close()
        if readers is not None:
            readers.close()


def train_in_ray(cfg: TrainConfig, out: str | Path, *, resume: bool = False) -> dict[str, Any]:
    """`train` inside a Ray trainer actor, every component an actor (`scalerl.trainer.distributed.ray_launch`)."""
    return run_in_ray(cfg.ray, partial(train, cfg, Path(out).resolve(), resume=resume))


def stop_reason(run: Run, t_start: float) -> str | None:
    """The `pipeline` limit that ends the RL phase now (a key of `scalerl.trainer.run.log.STOPPED_BY`), or None."""
    p = run.cfg.pipeline
    if run.step >= p.max_steps:
        return "max_steps"
    if p.max_time_s is not None and time.monotonic() - t_start >= p.max_time_s:
        return "max_time_s"
    if p.budget is not None and run.clock.spent(p.budget_axis) >= p.budget:
        return "budget"
    return None


# ------------------------------------------------------------------------------------------------ phases
def sample_groups(run: Run) -> list[RolloutGroup]:
    """`prompts_per_step` scored groups, waiting as the PipelineRL-k / PPO-off-policy-k rule demands."""
    return run.runtime.take_groups(run.cfg.pipeline.prompts_per_step, run.trainer.policy_version, TAKE_TIMEOUT_S)


def record_attempts(run: Run, groups: list[RolloutGroup]) -> None:
    """Every scored sample into the ledger (one transaction), under the number of the step that trains
    on it (1-based, as in metrics.jsonl); the ledger also decides retirements. Every group a step takes
    (refills included) passes here once, so the samples, tokens and generation FLOPs are counted here."""
    run.clock.add_taken(lengths for g in groups for lengths in g.sequence_lengths())
    items, verdicts = [], []
    for g in groups:
        for i, (sample, text, verdict, (_, generated)) in enumerate(
                zip(g.samples, g.scored_texts(), g.verdicts, g.sequence_lengths())):
            items.append(g.problem.verify_item(
                text, id=f"{g.group_id}/{i}", step=run.step + 1, policy_version=min(sample.policy_versions),
                sample_index=i, truncated=sample.truncated, completion_tokens=generated))
            verdicts.append(verdict)
    run.ledger.record(items, verdicts, step=run.step + 1)


def group_advantages(run: Run, kept: list[RolloutGroup],
                     zero_var_ids: set[int]) -> tuple[torch.Tensor, dict[str, float]]:
    """Group-centred advantages of the kept samples, normalized as `advantages.normalization` says."""
    if not kept:
        return torch.zeros(0), {}
    rewards = torch.tensor([r for g in kept for r in g.rewards], dtype=torch.float32)
    group_ids = torch.tensor([g.group_id for g in kept for _ in g.samples])
    flags = torch.tensor([g.group_id in zero_var_ids for g in kept for _ in g.samples])
    result = compute_advantages(rewards, group_ids, run.cfg.advantages, zero_variance=flags)
    return result.advantages, {k: v for k, v in result.metrics.items() if not k.startswith("reward/")}


def policy_step(run: Run, kept: list[RolloutGroup], advantages: torch.Tensor) -> tuple[list[int], dict[str, float]]:
    """One optimizer step on the kept groups; returns the lag of every trained token and the metrics."""
    t0 = time.perf_counter()
    version = run.trainer.policy_version
    if not kept:
        metrics = run.ranks.optimizer_step()
        run.clock.add_training(time.perf_counter() - t0)
        return [], metrics
    samples = [(g, s) for g in kept for s in g.samples]
    masks = [training_loss_mask(s, run.cfg.length) for _, s in samples]
    batch = pack_samples(
        prompt_ids=[g.prompt_token_ids for g, _ in samples], completion_ids=[s.token_ids for _, s in samples],
        gen_logprobs=[s.logprobs for _, s in samples], loss_masks=masks,
        advantages=advantages.tolist(), group_ids=[g.group_id for g, _ in samples])
    metrics = run.ranks.step(batch)  # every trainer rank takes its shard of the batch
    lag = [version - v for (_, s), m in zip(samples, masks) for v, keep in zip(s.policy_versions, m) if keep]
    run.clock.add_training(time.perf_counter() - t0, [(len(g.prompt_token_ids), len(s.token_ids)) for g, s in samples])
    return lag, metrics


def push_weights(run: Run) -> None:
    """The new weights into the generators, in flight (running sequences keep their KV cache): merged
    weights, or the adapters alone where vLLM serves them (`scalerl.trainer.core.lora_config.pushes_adapters`)."""
    if pushes_adapters(run.cfg.lora, run.cfg.engine.name):
        weights = adapter_state_dict(run.trainer.model)
    else:
        weights = run.ranks.gather_weights()  # full weights, gathered from every trainer rank when several
    run.state.last_push_s = run.runtime.push_weights(weights, run.trainer.policy_version).elapsed_s


def log_step(run: Run, groups: list[RolloutGroup], kept: list[RolloutGroup], zero_var_groups: int,
             lag: list[int], metrics: dict[str, float], t0: float) -> None:
    """One line of metrics.jsonl for the step (and the progress display)."""
    gen = run.runtime.stats()
    # One count through the ledger's owner (a Ray actor or this process), never the retired set itself.
    run.state.retired_count = int(run.ledger.query("SELECT count(*) FROM retired").rows[0][0])
    run.clock.add_generation_busy(gen.busy_s)
    last_tokens, last_t = run.state.last_tokens, run.state.last_tokens_at
    now = time.perf_counter()
    devices = devices_in_use(run.cfg)
    # The step's wall time, waits included, from the end of the last step or evaluation: an idle
    # device is still held (the paper's GPU-hours); validation and checkpoints are not counted.
    run.clock.add_wall(now - t0, devices)
    rec: dict[str, Any] = {
        "step": run.step, "policy_version": run.trainer.policy_version, "time": time.time(),
        "elapsed_s": run.state.elapsed_s, "step_time_s": now - t0,
        "effective_batch_fraction": len(kept) / max(1, run.cfg.pipeline.prompts_per_step),
        "zero_variance_fraction": zero_var_groups / max(1, len(groups)), "retired_count": run.state.retired_count,
        "tokens_per_s": (gen.sampled_tokens - last_tokens) / (now - last_t) if last_t else None,
        "generator/idle_fraction": gen.idle_fraction, "push_s": run.state.last_push_s,
        "devices": devices, **run.clock.metrics(),
    }
    run.state.last_tokens, run.state.last_tokens_at = gen.sampled_tokens, now
    rec.update(domain_metrics(groups, judged=judged_domains(run.cfg)))
    rec.update(episode_metrics(groups))  # multi-turn environments only
    if run.samples is not None:  # rollouts.jsonl, skipped long prompts, the format watch
        rec.update(run.samples.observe_step(run.step, groups))
    rec.update(run.ranks.last_push)  # gather time and host memory with several trainer ranks
    rec.update(lag_summary(lag))
    lm = length_metrics([s for g in groups for s in g.samples])
    rec["truncation_rate"] = lm.get("length/truncation_rate", 0.0)
    rec.update({k: v for k, v in lm.items() if k != "length/truncation_rate"})
    rec.update({k: v for k, v in metrics.items() if k not in rec})
    rec.setdefault("clip_frac", 0.0)
    run.log.write("step", rec)


def domain_metrics(groups: list[RolloutGroup], judged: Collection[str] = ()) -> dict[str, float | None]:
    """Batch reward and pass rate per domain, the second opinions of the `judged` domains, and the overall
    mean reward."""
    out: dict[str, float | None] = {}
    for domain in sorted({g.domain for g in groups}):
        verdicts = [v for g in groups if g.domain == domain for v in g.verdicts]
        out[f"reward/{domain}"] = float(np.mean([v.reward for v in verdicts]))
        out[f"pass_rate/{domain}"] = float(np.mean([v.correct for v in verdicts]))
        out[f"groups/{domain}"] = float(sum(g.domain == domain for g in groups))
        if domain in judged:
            out.update(second_opinion_metrics(domain, verdicts))
    out["reward/mean"] = float(np.mean([v.reward for g in groups for v in g.verdicts]))
    penalties = [p for g in groups for p in (g.length_penalties or [])]
    if penalties:
        out["length/penalty_mean"] = float(np.mean(penalties))
    return out


def judged_domains(cfg: TrainConfig) -> set[str]:
    """The run's domains with a second judge: their verifier settings give a `second_opinion` share."""
    return {domain for domain in cfg.domains if hasattr(cfg.verifier.section(domain), "second_opinion")}


def second_opinion_metrics(domain: str, verdicts: list[Verdict]) -> dict[str, float | None]:
    """The step's second opinions in `domain` (`scalerl.verifiers.second_opinion`): negative verdicts
    re-checked (`checked`), those the second judge accepts (`accepts`), and their share (`fn_rate`, null
    when none was checked): a running estimate of the verifier's false-negative rate."""
    marks = [v.details.get("second_opinion") for v in verdicts]
    checked = sum(mark in (ACCEPTS, REJECTS) for mark in marks)
    accepts = sum(mark == ACCEPTS for mark in marks)
    return {f"second_opinion/{domain}/checked": float(checked), f"second_opinion/{domain}/accepts": float(accepts),
            f"second_opinion/{domain}/fn_rate": accepts / checked if checked else None}


def lag_summary(lag: list[int]) -> dict[str, float | None]:
    if not lag:
        return {"lag/min": None, "lag/mean": None, "lag/p50": None, "lag/p90": None, "lag/max": None}
    a = np.asarray(lag)
    return {"lag/min": int(a.min()), "lag/mean": float(a.mean()), "lag/p50": float(np.percentile(a, 50)),
            "lag/p90": float(np.percentile(a, 90)), "lag/max": int(a.max())}


def validate(run: Run) -> dict[str, float]:
    """Held-out pass rate per domain against consumed compute, into metrics.jsonl."""
    holdout = {d: run.pools[d].holdout for d in run.cfg.domains}
    record = run.samples.validation_recorder(run.step) if run.samples is not None else None
    result = evaluate(run.model, run.codec, holdout, run.cfg, run.verifier, device=run.device,
                      policy_version=run.trainer.policy_version, record=record,
                      engine=validation_engine(run.cfg, run.runtime))
    val = {d: {k.split("/")[2]: v for k, v in result.items() if k.startswith(f"heldout/{d}/")} for d in holdout}
    rec = {"step": run.step, "policy_version": run.trainer.policy_version, "time": time.time(),
           **run.clock.metrics(), "val": val,
           "validation_s": result["validation_s"]}
    run.log.write("validation", rec)
    return rec


def checkpoint(run: Run) -> Path:
    """Model + optimizer + a copy of the ledger (taken with the sampler paused), atomically."""
    folder = step_folder(run.out / "checkpoints", run.step)
    with run.rollouts.paused():  # the sampler's state, its begun batch and the next group id agree
        extra = {"next_group_id": run.runtime.next_group_id(), "elapsed_s": run.state.elapsed_s,
                 **run.clock.state(), "sampler": run.sampler.state_dict(), "sampler_buffer": run.rollouts.draw.state()}
        run.ledger.flush()
        staging = run.out / "checkpoints" / f"~ledger-{run.step}"
        staging.mkdir(parents=True, exist_ok=True)
        shutil.copy2(run.out / LEDGER, staging / LEDGER)
    path = run.ranks.save_checkpoint(folder, extra=extra, files={LEDGER: staging / LEDGER})
    staging.rmdir()
    if run.cfg.checkpoint.keep_last is not None:
        prune_checkpoints(folder.parent, run.cfg.checkpoint.keep_last)
    return path


def finish(run: Run, stopped_by: str) -> dict[str, Any]:
    """Final validation, checkpoint, per-domain curve fits (JSON + PNG), and `summary.json` (with the limit
    that stopped the run)."""
    from scalerl.trainer.fit.curves import write_curves

    run.log.stopped(run.step, stopped_by)
    v = run.cfg.validation
    if v.enabled and run.step % v.every_steps:
        validate(run)
    checkpoint(run)
    curves = write_curves(run.out, run.cfg.domains) if v.enabled and v.fit_at_end else {}
    summary = {**summarize(run, curves), "stopped_by": stopped_by}
    (run.out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def summarize(run: Run, curves: dict) -> dict[str, Any]:
    from scalerl.trainer.run.log import read_metrics

    vals = read_metrics(run.out / "metrics.jsonl", "validation")
    heldout = {d: {"first": vals[0]["val"][d]["pass_rate"], "last": vals[-1]["val"][d]["pass_rate"]}
               for d in run.cfg.domains} if vals else {}
    gen = run.runtime.stats()
    return {"out": str(run.out), "steps": run.step, "policy_version": run.trainer.policy_version,
            "elapsed_s": run.state.elapsed_s, "heldout_pass_rate": heldout,
            "retired_count": run.state.retired_count, "generator_idle_fraction": gen.idle_fraction,
            "compute": run.clock.state(), "curves": curves}
