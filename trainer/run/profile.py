"""Offline difficulty profiling: sample every prompt of the run's data N times with the trainer's own
engine, prompt template and verifiers, and record the attempts in a ledger (POLARIS, Skywork-OR1).

`profile(cfg, ledger_path, samples)` profiles the prompts `scalerl train` would see with the same
configuration (`data.sources`, training pool and held-out set; prompts too long for the engine are
left out as in training), at the engine's sampling temperature and with its length control. The
attempts carry no step (one group per prompt in the ledger's terms) and nothing is retired.

Guarantees
- Resumable: a prompt is sampled only for the attempts it still lacks (`samples` minus what the ledger
  holds), and each prompt's samples are committed in one transaction, so an interrupted profile
  continues where it stopped and ends with exactly `samples` attempts per prompt.
- The profile ledger is an ordinary ledger: `scalerl-env data filter --ledger` keeps a band of it, and
  `curriculum.prior_ledger` makes it the sampler's difficulty prior.
Not guaranteed: the same completions as another run (engine batching changes sampling order).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from scalerl.curriculum.ledger.retirement import RetirementConfig
from scalerl.curriculum.ledger.store import Ledger
from scalerl.env.contracts.records import ProblemRecord
from scalerl.trainer.config.train import TrainConfig

IN_FLIGHT = 8  # requests submitted ahead (the engine batches their samples)


@dataclass
class ProfileSummary:
    prompts: int
    sampled_prompts: int
    attempts_recorded: int
    skipped_long: int
    elapsed_s: float


def _missing(ledger: Ledger, problems: list[ProblemRecord], samples: int) -> list[tuple[ProblemRecord, int]]:
    have = ledger.pass_rates([p.prompt_id for p in problems])
    out = []
    for p in problems:
        n = samples - (have[p.prompt_id].attempts if p.prompt_id in have else 0)
        if n > 0:
            out.append((p, n))
    return out


def _setup(cfg: TrainConfig, work_dir: Path) -> tuple[list[ProblemRecord], Any, Any, Any, int]:
    """(problems, codec, engine, verifier, prompts left out as too long) for `cfg`."""
    from scalerl.trainer.distributed.components import LocalComponents
    from scalerl.trainer.engines.device import resolve_device
    from scalerl.trainer.rollout.prompts import prepare_prompts
    from scalerl.trainer.run.data_sources import build_data
    from scalerl.trainer.run.setup import load_policy

    device = resolve_device(cfg.engine.device)
    torch.set_num_threads(cfg.pipeline.torch_threads)
    pools = build_data(cfg)
    model, tokenizer = load_policy(cfg, pools)
    model.to(device)
    codec, pools, skipped = prepare_prompts(cfg, tokenizer, pools)
    problems = [p for pool in pools.values() for p in (*pool.train, *pool.holdout)]
    parts = LocalComponents(cfg.engine_spec(), work_dir)
    engine = parts.engine(model, codec.eos_token_id, device=device, policy_version=0, seed=cfg.pipeline.seed)
    return problems, codec, engine, parts.verifier(cfg.verifier), sum((skipped or {}).values())


def profile(cfg: TrainConfig, ledger_path: Path, samples: int,
            progress: Callable[[int, int], None] | None = None) -> ProfileSummary:
    """Sample every prompt `samples` times (resuming) and record the attempts in `ledger_path`."""
    from scalerl.trainer.rollout.worker import Rollouts

    t0 = time.monotonic()
    ledger_path.parent.mkdir(parents=True, exist_ok=True)
    problems, codec, engine, verifier, skipped = _setup(cfg, ledger_path.parent)
    recorded = 0
    try:
        with Ledger(ledger_path, retirement=RetirementConfig(enabled=False)) as ledger:
            ledger.upsert_problems(problems)
            todo = _missing(ledger, problems, samples)
            queue = iter(todo)
            rollouts = Rollouts(cfg, codec, lambda: next(queue)[0], verifier, seed=cfg.pipeline.seed)
            wanted = {i: n for i, (_, n) in enumerate(todo)}
            recorded = _run(engine, rollouts, ledger, wanted, progress)
    finally:
        engine.close()
        getattr(verifier, "close", lambda: None)()
    return ProfileSummary(len(problems), len(todo), recorded, skipped, time.monotonic() - t0)


def _run(engine: Any, rollouts: Any, ledger: Ledger, wanted: dict[int, int],
         progress: Callable[[int, int], None] | None) -> int:
    """Submit the groups (at most IN_FLIGHT ahead), score and record each as it finishes."""
    submitted = finished = recorded = 0
    total = len(wanted)
    while finished < total:
        while submitted < total and submitted - finished < IN_FLIGHT:
            request = rollouts.make_request(submitted)
            engine.submit(request.model_copy(update={"samples_per_prompt": wanted[submitted]}))
            submitted += 1
        for generated in engine.poll(timeout_s=0.05):
            group = rollouts.score(generated, 0, time.time())
            recorded += _record(ledger, group)
            finished += 1
            if progress is not None:
                progress(finished, total)
    return recorded


def _record(ledger: Ledger, group: Any) -> int:
    items = [group.problem.verify_item(text, id=f"profile/{group.group_id}/{i}", sample_index=i,
                                       truncated=s.truncated, completion_tokens=len(s.token_ids))
             for i, (s, text) in enumerate(zip(group.samples, group.completions))]
    return ledger.record(items, group.verdicts, step=None)
