"""PipelineRL-k and PPO-off-policy-k: when generators may submit and when the trainer may take.

The rules, with P = prompts_per_step, v = the version of the last weights pushed, and a group's
version = the engine's policy version when it was submitted (its tokens are that version or newer):

- PipelineRL-k admission: groups submitted in total ≤ (v + k + 1) · P.
- PipelineRL-k take: the trainer at version s takes the P oldest scored groups, but *waits* while
  the groups it would leave behind could not all be trained by their deadline (a group of version u
  must be trained by step u + k; each step takes P): #left with version ≤ u ≤ (u + k − s) · P for
  every u. This is earliest-deadline-first scheduling of unit jobs; admission keeps the set
  feasible (after admission, #outstanding with version ≤ u ≤ (u + k + 1 − s) · P), so every trained
  token has lag = s − token version ≤ k, while the trainer is free to skip a straggler that still
  has slack. k = 0 is synchronous (generate P groups, train on them, repeat).
- PPO-off-policy-k admission: groups submitted ≤ (⌊v / k⌋ + 1) · k · P: k batches from one policy,
  then nothing until k updates have been pushed. The take rule is "oldest P scored groups"; the lag
  is at most k − 1 by construction.
"""

from __future__ import annotations

from collections.abc import Mapping

from scalerl.trainer.rollout.messages import RolloutGroup


def admission_limit(mode: str, k: int, prompts_per_step: int, pushed_version: int) -> int:
    """How many groups may have been submitted in total once version `pushed_version` is live."""
    if mode == "pipeline":
        return (pushed_version + k + 1) * prompts_per_step
    if mode == "ppo-offpolicy":
        return (pushed_version // k + 1) * k * prompts_per_step
    raise ValueError(f"unknown pipeline mode {mode!r}")


def must_take_version(mode: str, k: int, trainer_version: int) -> int | None:
    """The lag base `s - k` of the pipeline take rule (None: no rule, PPO-off-policy-k)."""
    return trainer_version - k if mode == "pipeline" else None


def choose_groups(scored: list[RolloutGroup], outstanding_versions: Mapping[int, int], n: int,
                  base: int | None) -> list[RolloutGroup] | None:
    """The trainer's batch (the `n` oldest scored groups), or None when it has to wait.

    `outstanding_versions` maps every submitted, not yet taken group (scored or not) to its version.
    With `base` = s − k the batch is accepted only if the groups left behind can still meet their
    deadlines (a group of version u must be trained by step u + k, and each step takes n):
    for every u, #left with version ≤ u ≤ (u − base) · n. Oldest-first taking plus this wait is
    earliest-deadline-first scheduling, which never misses a deadline the admission rule made feasible."""
    if len(scored) < n:
        return None
    batch = sorted(scored, key=lambda g: (g.submitted_version, g.group_id))[:n]
    if base is not None:
        taken = {g.group_id for g in batch}
        left = sorted(v for gid, v in outstanding_versions.items() if gid not in taken)
        for count, version in enumerate(left, start=1):
            if count > (version - base) * n:
                return None
    return batch
