"""Per-source shares within one domain of the sampler (`data.sources[*].weight`).

A domain whose training problems come from two or more sources with a positive weight draws from each
source in proportion to its weight, whatever the sources' sizes (math = a.parquet weight 3 + b.parquet
weight 1: 75 % / 25 % of math draws). The domain still walks one epoch at a time (`scalerl.curriculum.sampler`,
the ledger's `epochs`): an epoch selects every active problem of the *tight* source (the most weight per
active problem; the first in config order on ties) and, from every other source s,
`w_s / w_tight * A_tight` problems (A = the source's active problems when the epoch starts; the
fractional rest carries over to the next epoch). A source's problems come from a seeded cyclic walk
over it (a fresh shuffle per pass), so a source larger than its share rotates through all its
problems over several epochs; the epoch's order is one seeded shuffle of the selection.

Guarantees:
- Over whole epochs each source's share of the domain's draws is its weight's share (to one problem
  per source per epoch; the carried fraction keeps the long-run share exact).
- Nothing repeats within an epoch (a walk that crosses a pass boundary skips what it already took).
- When every source has the same weight per active problem (equal weights and equal sizes) the
  selection is every active problem: the epoch is exactly the single-source permutation.
- Deterministic and resumable: a selection is a function of the seed, domain, source label, the walk
  positions stored in the sampler state and the epoch's retirement watermark.
Not guaranteed: shares when a source has no active problem left (its share goes to the others), when
strategies pass over prompts (bench, skip, stage levels), or within a prefix of an epoch.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Active = Callable[[str], bool]


def quotas(weights: Mapping[str, float], active: Mapping[str, int], carry: Mapping[str, float]
           ) -> tuple[dict[str, int], dict[str, float]]:
    """Problems each source contributes to the next epoch, and the fractions carried to the one after."""
    live = [s for s in weights if weights[s] > 0 and active[s] > 0]
    takes = {s: 0 for s in weights}
    rest = dict(carry)
    if not live:
        return takes, rest
    tight = max(live, key=lambda s: weights[s] / active[s])  # max() keeps the first of equals
    per_problem = weights[tight] / active[tight]
    for s in live:
        if weights[s] / active[s] >= per_problem:  # exact for ties: the whole source, nothing carried
            takes[s], rest[s] = active[s], 0.0
            continue
        x = weights[s] * active[tight] / weights[tight] + carry[s]
        takes[s] = min(active[s], math.floor(x))
        rest[s] = x - takes[s]
    return takes, rest


class SourceWalk:
    """One source's problems as an endless walk: pass k is the sorted ids shuffled by `Random(key:k)`."""

    def __init__(self, ids: Sequence[str], key: str) -> None:
        self.ids, self.key = sorted(ids), key
        self._passes: dict[int, list[str]] = {}

    def _at(self, pos: int) -> str:
        k, i = divmod(pos, len(self.ids))
        perm = self._passes.get(k)
        if perm is None:
            if len(self._passes) > 2:  # a walk only moves forward: older passes are not read again
                self._passes.pop(min(self._passes))
            perm = list(self.ids)
            random.Random(f"{self.key}:{k}").shuffle(perm)
            self._passes[k] = perm
        return perm[i]

    def collect(self, start: int, active: Active, *, n: int | None = None, end: int | None = None
                ) -> tuple[list[str], int]:
        """Distinct active ids from position `start`: `n` of them, or all before position `end`; and the
        position after the last one read. Reading [start, returned end) again gives the same ids."""
        taken: list[str] = []
        if not self.ids:
            return taken, start
        seen: set[str] = set()
        pos, limit = start, end if end is not None else start + 2 * len(self.ids)
        while pos < limit and (n is None or len(taken) < n):
            pid = self._at(pos)
            pos += 1
            if pid not in seen and active(pid):
                seen.add(pid)
                taken.append(pid)
        return taken, pos


class SourceMix:
    """The weighted sources of one domain: `weights` (label -> weight > 0) and their walks."""

    def __init__(self, seed: int, domain: str, weights: Mapping[str, float], ids: Mapping[str, Sequence[str]]
                 ) -> None:
        self.weights = dict(weights)
        self.walks = {s: SourceWalk(ids[s], f"{seed}:{domain}:{s}") for s in self.weights}

    def fresh_state(self) -> dict[str, Any]:
        return {s: {"start": 0, "end": 0, "carry": 0.0} for s in self.weights}

    def advance(self, state: dict[str, Any], active: Active) -> None:
        """Select the next epoch's problems: each walk continues where the last epoch's selection ended."""
        counts = {s: sum(map(active, walk.ids)) for s, walk in self.walks.items()}
        takes, carry = quotas(self.weights, counts, {s: state[s]["carry"] for s in self.weights})
        for s, walk in self.walks.items():
            start = state[s]["end"]
            _, end = walk.collect(start, active, n=takes[s])
            state[s] = {"start": start, "end": end, "carry": carry[s]}

    def selection(self, state: Mapping[str, Any], active: Active) -> list[str]:
        """The current epoch's problems (sorted), rebuilt from the stored walk positions."""
        return sorted(pid for s, walk in self.walks.items()
                      for pid in walk.collect(state[s]["start"], active, end=state[s]["end"])[0])
