"""Discrete-event simulation of a generator cluster and a trainer under the pipeline rules.

It runs the *same* rule functions as the real runtime (`scalerl.trainer.rollout.lag_rules.admission_limit`,
`must_take_version`, `choose_groups`) over simulated time, so the utilization it reports is the one
those rules produce, and the lag bound can be checked on millions of simulated tokens.

Model (parameters in `SimConfig`, defaults sized like a ScaleRL 8B run: 48 prompts x 16 samples,
thinking lengths with a long tail up to the interruption budget):
- generators: `slots` sequences decode concurrently in total (continuous batching); a sample of L
  tokens holds one slot for L / `tokens_per_s_per_seq` seconds. Lengths are lognormal (median
  `median_tokens`, log-sd `sigma`), capped at `max_tokens` (the interruption + answer budget).
- trainer: a step on a batch of T tokens takes T / `train_tokens_per_s` seconds times a lognormal
  jitter, then the weight push takes `push_s` (generation continues during a PipelineRL push).
- utilization: generator = busy slot-seconds / (slots x wall time); trainer = training seconds /
  wall time.
Non-guarantees: no preemption, no per-batch decode-speed dependence on occupancy, no stragglers
among generator machines; it shows the effect of the rules, not the speed of any hardware.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass

from scalerl.env.contracts.records import ProblemRecord
from scalerl.trainer.engines.base import GeneratedSample
from scalerl.trainer.rollout.lag_rules import admission_limit, choose_groups, must_take_version
from scalerl.trainer.rollout.messages import RolloutGroup


@dataclass
class SimConfig:
    mode: str = "pipeline"
    k: int = 8
    prompts_per_step: int = 48
    samples_per_prompt: int = 16
    slots: int = 1024
    tokens_per_s_per_seq: float = 40.0
    median_tokens: float = 3000.0
    sigma: float = 0.8
    max_tokens: int = 14000
    train_tokens_per_s: float = 60000.0
    push_s: float = 5.0
    steps: int = 60
    seed: int = 0


@dataclass
class SimResult:
    wall_s: float
    generator_utilization: float
    trainer_utilization: float
    max_lag: int
    samples_per_s: float


_PROBLEM = ProblemRecord(prompt_id="sim", domain="math", source="sim", prompt=[{"role": "user", "content": "x"}],
                         answer="0")


def _group(gid: int, version: int, n: int) -> RolloutGroup:
    sample = GeneratedSample(sample_index=0, token_ids=[0], logprobs=[0.0], policy_versions=[version],
                             loss_mask=[1], finish_reason="stop")
    return RolloutGroup(group_id=gid, problem=_PROBLEM, prompt_token_ids=[0], samples=[sample] * n,
                        completions=[""] * n, verdicts=[], submitted_version=version, submitted_at=0.0,
                        finished_at=0.0)


def simulate(cfg: SimConfig) -> SimResult:
    rng = random.Random(cfg.seed)
    p, n = cfg.prompts_per_step, cfg.samples_per_prompt
    now, pushed, trainer_version, submitted = 0.0, 0, 0, 0
    events: list[tuple[float, int, str, int]] = []  # (time, tie, kind, group id)
    tie = 0
    queue: list[tuple[int, float]] = []  # waiting samples: (group id, duration)
    free = cfg.slots
    busy_slot_s = train_s = 0.0
    left: dict[int, int] = {}
    tokens: dict[int, float] = {}
    version_of: dict[int, int] = {}
    outstanding: dict[int, int] = {}
    scored: list[RolloutGroup] = []
    training = False
    max_lag = 0

    def push(t: float, kind: str, gid: int) -> None:
        nonlocal tie
        tie += 1
        heapq.heappush(events, (t, tie, kind, gid))

    while trainer_version < cfg.steps:
        # admission, then slot assignment
        while submitted < admission_limit(cfg.mode, cfg.k, p, pushed):
            gid = submitted
            submitted += 1
            version_of[gid], outstanding[gid], left[gid], tokens[gid] = pushed, pushed, n, 0.0
            for _ in range(n):
                length = min(cfg.max_tokens, rng.lognormvariate(math.log(cfg.median_tokens), cfg.sigma))
                tokens[gid] += length
                queue.append((gid, length / cfg.tokens_per_s_per_seq))
        while free and queue:
            gid, dur = queue.pop(0)
            free -= 1
            busy_slot_s += dur
            push(now + dur, "sample", gid)
        if not training:
            batch = choose_groups(scored, outstanding, p, must_take_version(cfg.mode, cfg.k, trainer_version))
            if batch is not None:
                taken = {g.group_id for g in batch}
                scored = [g for g in scored if g.group_id not in taken]
                for gid in taken:
                    outstanding.pop(gid)
                    max_lag = max(max_lag, trainer_version - version_of[gid])
                batch_tokens = sum(tokens[g] for g in taken)
                dur = batch_tokens / cfg.train_tokens_per_s * rng.lognormvariate(0.0, 0.1)
                train_s += dur
                training = True
                push(now + dur + cfg.push_s, "trained", -1)
        t, _, kind, gid = heapq.heappop(events)
        now = t
        if kind == "sample":
            free += 1
            left[gid] -= 1
            if left[gid] == 0:
                scored.append(_group(gid, version_of[gid], 1))
        else:
            training = False
            trainer_version += 1
            pushed = trainer_version
    busy_slot_s -= sum(max(0.0, t - now) for t, _, kind, _ in events if kind == "sample")
    return SimResult(wall_s=now, generator_utilization=busy_slot_s / (cfg.slots * now),
                     trainer_utilization=train_s / now, max_lag=max_lag,
                     samples_per_s=cfg.steps * p * n / now)
