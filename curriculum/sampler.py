"""The training sampler: seeded epochs over the active problems of each domain, mixed by weight.

- Each domain walks its own epochs. An epoch is a permutation of the domain's *active* problems
  (not held out, not retired when the epoch starts), shuffled by `Random(f"{seed}:{domain}:{epoch}")`.
  A prompt retired during an epoch is skipped when the cursor reaches it: retired prompts are never
  sampled again, held-out (validation) prompts never at all.
- Domains are interleaved by smooth weighted round-robin over `weights` (e.g. `{"math": 1, "code": 1}`):
  every slot adds each domain's weight to its credit and takes the domain with the highest credit,
  which then pays the total. Over any run of slots each domain's share is within one slot of its weight
  share, whatever the domain sizes (a small domain simply runs more epochs). Ties go to the domain name
  that sorts first. A domain whose active set becomes empty leaves the mix; when none is left,
  `SamplerExhausted` is raised.
- Deterministic: the same problems, weights, seed and retirement sequence give the same batches.
- Resumable: with a ledger, the state (per-domain epoch, cursor and retirement watermark, a mixed
  domain's source walk positions, mixing credits, batch count) is committed to `sampler_state` after
  every `next_batch`, and epoch starts to `epochs`. A new Sampler on the same ledger continues where
  the last one stopped: the permutation is rebuilt from the seed and the watermark (retirements with
  sequence number ≤ watermark were excluded when the epoch started). The state is also available as
  `state_dict()` for trainer checkpoints.

Sources: with `sources=` (domain -> source label -> weight) and `source_of=` (prompt id -> label), a
domain with two or more positive-weight sources draws from them by weight (`scalerl.curriculum.source_mix`:
each epoch selects every source's share, then shuffles the selection as above); a zero-weight
source's problems are never drawn. A domain with one source (or without `sources`) walks exactly as
described above.

Strategies: with `policy=` (a `scalerl.curriculum.policy.CurriculumPolicy`) the policy chooses the domain
weights of each batch and the next prompt of a domain (priority, bench rules, re-admission, GRESO
skipping, stages); its state travels in the sampler state. Without it (`policy=None`, ScaleRL's
defaults) the sampler runs exactly the walk described above.

Not guaranteed: a batch that was drawn but never trained on (a crash between the two) is not redrawn
after a restart from the ledger (at-most-once per epoch); `resume_from` a trainer checkpoint's
`state_dict()` for exact replay (`scalerl train --resume` does). A domain with fewer active prompts
than its share of one batch may repeat a prompt within that batch (its epoch wraps).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from scalerl.curriculum.ledger.store import Ledger
from scalerl.curriculum.source_mix import SourceMix
from scalerl.env.contracts.records import ProblemRecord

logger = logging.getLogger(__name__)
STATE_VERSION = 1


class SamplerExhausted(RuntimeError):
    """Every domain with a positive weight has run out of active problems."""


class SamplerStateError(RuntimeError):
    """Stored sampler state that does not belong to this problem set / seed / weights."""


class Sampler:
    def __init__(
        self, problems: Sequence[ProblemRecord], *, weights: Mapping[str, float], seed: int,
        ledger: Ledger | None = None, holdout_ids: AbstractSet[str] = frozenset(), name: str = "train",
        resume: bool = True, policy: Any = None, sources: Mapping[str, Mapping[str, float]] | None = None,
        source_of: Mapping[str, str] | None = None,
    ) -> None:
        self.ledger, self.name, self.seed, self.policy = ledger, name, int(seed), policy
        self.weights = self._check_weights(problems, weights)
        self._by_id: dict[str, ProblemRecord] = {}
        for p in problems:
            if p.prompt_id in self._by_id:
                raise ValueError(f"duplicate prompt_id {p.prompt_id!r} in problems")
            self._by_id[p.prompt_id] = p
        self.holdout_ids = frozenset(holdout_ids)
        self.source_of, sources = dict(source_of or {}), sources or {}
        by_source = self._check_sources(problems, sources)
        self._ids = {d: sorted(pid for srcs in by_source[d].values() for pid in srcs) for d in self.weights}
        # a domain with two or more weighted sources mixes them by weight (scalerl.curriculum.source_mix)
        self.mixes = {d: SourceMix(self.seed, d, {s: w for s, w in sources[d].items() if w > 0}, by_source[d])
                      for d in self.weights if len(by_source[d]) > 1}
        self._own_retired: dict[str, int] = {}
        self._orders: dict[str, list[str]] = {}
        self._new_epochs: list[tuple] = []
        self._state = self._fresh_state()
        stored = ledger.load_sampler_state(name) if (ledger is not None and resume) else None
        if stored is not None:
            self.resume_from(stored)

    def resume_from(self, state: Mapping[str, Any]) -> None:
        """Continue from stored state (the ledger's, or a trainer checkpoint's `state_dict()` for exact
        replay); the policy hears of the resume once (re-admission queue)."""
        self.load_state_dict(state)
        logger.info("sampler %r resumed at batch %d", self.name, self._state["batches"])
        if self.policy is not None:
            self.policy.on_resume(self)

    @staticmethod
    def _check_weights(problems: Sequence[ProblemRecord], weights: Mapping[str, float]) -> dict[str, float]:
        present = {p.domain for p in problems}
        out = {}
        for domain, w in sorted(weights.items()):
            if w < 0:
                raise ValueError(f"weight for {domain!r} is negative ({w})")
            if w > 0 and domain not in present:
                raise ValueError(f"weight given for domain {domain!r} but no problem has that domain")
            if w > 0:
                out[domain] = float(w)
        if not out:
            raise ValueError("at least one domain needs a positive weight")
        unmixed = sorted(present - set(out))
        if unmixed:
            logger.info("domains without weight are not sampled: %s", unmixed)
        return out

    def _check_sources(self, problems: Sequence[ProblemRecord], sources: Mapping[str, Mapping[str, float]]
                       ) -> dict[str, dict[str, list[str]]]:
        """Training ids per domain per source with a positive weight (one unnamed source per domain
        without `sources`); a zero-weight source's problems are never drawn."""
        out: dict[str, dict[str, list[str]]] = {d: {} for d in self.weights}
        for d, ws in sources.items():
            for s, w in ws.items():
                if not w >= 0 or math.isinf(w):
                    raise ValueError(f"source weight for {d}/{s!r} must be a finite number >= 0, got {w}")
        for p in problems:
            if p.domain not in out or p.prompt_id in self.holdout_ids:
                continue
            ws = sources.get(p.domain) or None
            label = self.source_of.get(p.prompt_id, "") if ws else ""
            if ws is not None and label not in ws:
                raise ValueError(f"problem {p.prompt_id!r} ({p.domain}) has source {label!r}, not one of {sorted(ws)}")
            if ws is None or ws[label] > 0:
                out[p.domain].setdefault(label, []).append(p.prompt_id)
        return out

    def _fingerprint(self) -> dict[str, str]:
        """Hash of each domain's ids (and, for a mixed domain, of each id's source and the weights)."""
        out = {}
        for d, ids in self._ids.items():
            mix = self.mixes.get(d)
            text = "\n".join(ids) if mix is None else json.dumps(
                [[f"{pid}\t{self.source_of[pid]}" for pid in ids], mix.weights], sort_keys=True)
            out[d] = hashlib.sha256(text.encode()).hexdigest()[:16]
        return out

    def _fresh_state(self) -> dict[str, Any]:
        state = {"version": STATE_VERSION, "seed": self.seed, "weights": self.weights,
                 "fingerprint": self._fingerprint(), "batches": 0, "credit": {d: 0.0 for d in self.weights},
                 "domains": {d: {"epoch": -1, "cursor": 0, "watermark": 0, "exhausted": False} for d in self.weights},
                 "own_retired": {}}
        for d, mix in self.mixes.items():
            state["domains"][d]["sources"] = mix.fresh_state()
        if self.policy is not None:
            state["policy"] = self.policy.fresh_state()
        return state

    # ------------------------------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        state = dict(self._state)
        state["domains"] = json.loads(json.dumps(state["domains"]))  # detached: a mixed domain's walks nest
        state["own_retired"] = dict(self._own_retired)
        if "policy" in state:
            state["policy"] = json.loads(json.dumps(state["policy"]))
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        mine = self._fresh_state()
        for key in ("version", "seed", "weights", "fingerprint"):
            if state.get(key) != mine[key]:
                raise SamplerStateError(
                    f"stored sampler state {self.name!r} has {key}={state.get(key)!r}, this sampler has "
                    f"{mine[key]!r}; use the same problems/seed/weights or start fresh with resume=False")
        self._state = {k: state[k] for k in mine if k != "policy"}
        if "policy" in mine:  # a run started without strategies may resume with them
            self._state["policy"] = json.loads(json.dumps(state.get("policy", mine["policy"])))
        self._state["credit"] = dict(state["credit"])
        self._state["domains"] = json.loads(json.dumps(state["domains"]))
        self._own_retired = dict(state.get("own_retired", {}))
        self._orders = {}

    # ------------------------------------------------------------------------------------------ policy view
    # What a strategy policy (scalerl.curriculum.policy) reads and keeps; all of it is checkpointed with the sampler.
    @property
    def policy_state(self) -> dict[str, Any]:
        """The policy's own part of the sampler state (JSON-serializable; the policy mutates it)."""
        return self._state["policy"]

    def domain_state(self, domain: str) -> dict[str, Any]:
        """The domain's epoch bookkeeping: `epoch`, `cursor`, `exhausted`, ... (the policy may move `cursor`)."""
        return self._state["domains"][domain]

    def domain_ids(self, domain: str) -> list[str]:
        """Every training prompt id of the domain, sorted."""
        return self._ids[domain]

    def problem(self, prompt_id: str) -> ProblemRecord | None:
        """The problem this sampler was given with this id, or None (`holdout_ids` may name some of them)."""
        return self._by_id.get(prompt_id)

    # ------------------------------------------------------------------------------------------ retirement
    def retired_ids(self) -> dict[str, int]:
        """Retired prompt id -> retirement sequence number (the ledger's, or this sampler's own)."""
        return self.ledger.retired_seq() if self.ledger is not None else self._own_retired

    def retire(self, prompt_ids: Sequence[str]) -> None:
        """Without a ledger: retire these prompts for good (e.g. retired by another run)."""
        if self.ledger is not None:
            raise RuntimeError("this sampler reads retirements from its ledger; record the verdicts there instead")
        for pid in prompt_ids:
            self._own_retired.setdefault(pid, len(self._own_retired) + 1)

    # ------------------------------------------------------------------------------------------ drawing
    def epoch_order(self, domain: str, retired: Mapping[str, int]) -> list[str]:
        """The domain's seeded order for its current epoch (prompts active when the epoch started)."""
        st = self._state["domains"][domain]
        order = self._orders.get(domain)
        if order is None:
            active = self._active_at(st["watermark"], retired)
            mix = self.mixes.get(domain)
            order = [pid for pid in self._ids[domain] if active(pid)] if mix is None else mix.selection(
                st["sources"], active)
            random.Random(f"{self.seed}:{domain}:{st['epoch']}").shuffle(order)
            self._orders[domain] = order
        return order

    @staticmethod
    def _active_at(watermark: int, retired: Mapping[str, int]):
        """Whether a prompt was active when an epoch with this watermark started."""
        return lambda pid: retired.get(pid, watermark + 1) > watermark

    def start_epoch(self, domain: str, retired: Mapping[str, int]) -> list[str]:
        """Begin the domain's next epoch and return its order; an empty order marks the domain exhausted."""
        st = self._state["domains"][domain]
        st.update(epoch=st["epoch"] + 1, cursor=0, watermark=max(retired.values(), default=0))
        if domain in self.mixes:
            self.mixes[domain].advance(st["sources"], self._active_at(st["watermark"], retired))
        self._orders.pop(domain, None)
        order = self.epoch_order(domain, retired)
        self._new_epochs.append((domain, st["epoch"], len(order), sum(1 for p in self._ids[domain] if p in retired)))
        if not order:
            st["exhausted"] = True
            logger.warning("domain %r has no active problems left; it leaves the mix", domain)
        return order

    def _draw(self, domain: str, retired: Mapping[str, int]) -> str | None:
        if self.policy is not None:
            return self.policy.draw(self, domain, retired)
        return self.walk(domain, retired)

    def walk(self, domain: str, retired: Mapping[str, int]) -> str | None:
        """The next active prompt of the epoch's seeded order (the uniform draw); None when exhausted."""
        st = self._state["domains"][domain]
        order = self.epoch_order(domain, retired) if st["epoch"] >= 0 else self.start_epoch(domain, retired)
        for _ in range(2):  # at most one epoch change per draw: a fresh order holds no retired prompt
            while st["cursor"] < len(order):
                pid = order[st["cursor"]]
                st["cursor"] += 1
                if pid not in retired:
                    return pid
            order = self.start_epoch(domain, retired)
            if st["exhausted"]:
                return None
        return None

    def _pick_domain(self, weights: Mapping[str, float] | None = None) -> str | None:
        weights = self.weights if weights is None else weights
        live = [d for d in self.weights if not self._state["domains"][d]["exhausted"]]
        if not live:
            return None
        credit = self._state["credit"]
        total = sum(weights[d] for d in live)
        for d in live:
            credit[d] += weights[d]
        best = max(live, key=lambda d: (credit[d], [-ord(c) for c in d]))
        credit[best] -= total
        return best

    def next_batch(self, n: int) -> list[ProblemRecord]:
        """The next `n` training problems (state committed to the ledger before returning)."""
        if n < 1:
            raise ValueError(f"batch size must be >= 1, got {n}")
        retired = self.retired_ids()
        weights = None
        if self.policy is not None:
            self.policy.begin_batch(self)
            weights = self.policy.domain_weights(self.weights)
        batch: list[ProblemRecord] = []
        while len(batch) < n:
            domain = self._pick_domain(weights)
            if domain is None:
                raise SamplerExhausted(f"every weighted domain ran out of active problems after {len(batch)} "
                                       f"of {n} in batch {self._state['batches']}")
            pid = self._draw(domain, retired)
            if pid is not None:
                batch.append(self._by_id[pid])
        self._state["batches"] += 1
        if self.ledger is not None:
            self.ledger.save_sampler_state(self.name, self.state_dict(), self._new_epochs)
        self._new_epochs = []
        return batch

    @property
    def batches(self) -> int:
        """Batches drawn so far (resumed runs included): the clock of `curriculum.stages`."""
        return int(self._state["batches"])

    def epochs(self) -> dict[str, int]:
        """Current epoch of each domain (-1 before its first draw)."""
        return {d: st["epoch"] for d, st in self._state["domains"].items()}
