"""The sampler's strategy hook: priority, bench rules, re-admission, GRESO skipping, mixing, stages.

`Sampler(..., policy=CurriculumPolicy(cfg, seed=...))` hands three decisions to this object: the
domain weights of each batch, and which prompt of a domain is drawn next. Before each batch the
policy reads the counts its active strategies need from the ledger (`scalerl.curriculum.ledger.counts`);
every decision is a function of those counts, the seed and the sampler's stored state, so a sampler
rebuilt on the same ledger draws the same prompts (the policy's state — prompts drawn this epoch,
the re-admission queue, a draw counter — travels inside the sampler state).

Guarantees
- Without replacement within an epoch: a prompt is drawn (or passed over) at most once per epoch of
  its domain; retired and held-out prompts are never drawn, except retired ones re-admitted on purpose.
- A domain with several weighted sources (`scalerl.curriculum.source_mix`) keeps their shares under every
  priority: without replacement the weights order the epoch's selection; with replacement each draw
  picks the source by its weight first, then a prompt of that source by priority.
- A prompt passed over (skipped, benched, outside the stage's level) is counted in `events`; when a
  whole pass over the domain is refused, the last candidate is drawn anyway (`forced`), so a batch
  always fills while the domain has active prompts.
Not guaranteed: that priority weights are current to the sample (they are read once per batch, and
in a pipelined run the newest groups are still being generated).
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scalerl.curriculum import strategies as st
from scalerl.curriculum.ledger import counts as lc
from scalerl.curriculum.strategy_config import StrategyConfig

if TYPE_CHECKING:
    from scalerl.curriculum.sampler import Sampler


class CurriculumPolicy:
    def __init__(self, cfg: StrategyConfig, *, seed: int, prior: Mapping[str, float] | None = None) -> None:
        self.cfg, self.seed, self.prior = cfg, int(seed), dict(prior or {})
        self.events: Counter[str] = Counter()
        self.gauges: dict[str, float] = {}
        self._lock = threading.Lock()
        self._rates: dict[str, Any] = {}
        self._windows: dict[str, tuple[int, int]] = {}
        self._streaks: dict[str, tuple[int, bool]] = {}
        self._p = (cfg.skip.p_initial, cfg.skip.p_initial)
        self._weights: dict[str, float] | None = None
        self._stage_dropped: set[str] = set()
        self._stage_cache: int | None = None

    # ------------------------------------------------------------------------------------ state
    def fresh_state(self) -> dict[str, Any]:
        return {"drawn": {}, "queue": [], "resumes": 0, "n": 0, "draws": 0, "stage_draws": {"0": 0}}

    def on_resume(self, sampler: Sampler) -> None:
        """Called when the sampler continued from stored state: queue re-admissions (resume_fraction)."""
        state = sampler.policy_state
        state["resumes"] += 1
        if self.cfg.readmission.mode == "resume_fraction":
            retired = [pid for pid in sampler.retired_ids()
                       if sampler.problem(pid) is not None and pid not in sampler.holdout_ids]
            queued = st.readmitted_on_resume(retired, self.cfg.readmission.fraction, self.seed, state["resumes"])
            state["queue"] = list(state["queue"]) + queued

    # ------------------------------------------------------------------------------------ per batch
    def begin_batch(self, sampler: Sampler) -> None:
        """Read the counts the active strategies need (once per batch)."""
        ledger, cfg = sampler.ledger, self.cfg
        self._rates = ledger.pass_rates() if ledger is not None else {}
        self._p_cache: dict[str, float] = {}
        self._w_cache: dict[str, float] = {}
        if ledger is None:
            return
        if cfg.bench.active:
            self._windows = lc.last_k_windows(ledger, cfg.bench.last_k or 1)
        if cfg.skip.mode == "greso":
            self._streaks = lc.zero_variance_streaks(ledger)
            self._p = st.greso_probabilities(lc.step_outcomes(ledger), cfg.skip)
        if cfg.mixing.mode != "fixed":
            progress = lc.domain_progress(ledger, cfg.mixing.window_groups)
            self._weights = st.MIXINGS[cfg.mixing.mode](sampler.weights, progress, cfg.mixing)
        self._update_stage_drops(sampler)
        with self._lock:
            self.gauges = {"p_easy": self._p[0], "p_hard": self._p[1], "stage": float(self._stage(sampler)),
                           **{f"weight/{d}": w for d, w in (self._weights or sampler.weights).items()}}

    def _stage(self, sampler: Sampler) -> int:
        return st.stage_index(sampler.batches, self.cfg.stages)

    def _update_stage_drops(self, sampler: Sampler) -> None:
        """POLARIS re-filtering: prompts above a finished stage's `drop_above` stay benched afterwards.

        A stage's samples are the groups its batches drew (the draw counts at each boundary are in the
        policy state), found in the ledger by counting groups in step order, so refills (steps of more
        than one batch) do not shift the stage. The sampler runs up to k + 1 batches ahead of training
        (PipelineRL-k), so at the boundary the stage's last groups are not recorded yet: the re-filter is
        recomputed at every batch until the ledger holds all of them, then kept (groups lost in flight at
        a restart leave it recomputing: one query per batch)."""
        state, current = sampler.policy_state, self._stage(sampler)
        bounds = state.setdefault("stage_draws", {"0": 0})
        bounds.setdefault(str(current), int(state.get("draws", 0)))
        if self._stage_cache == current or sampler.ledger is None:
            return
        dropped: set[str] = set()
        complete = True
        for i, stage in enumerate(self.cfg.stages[:current]):
            lo, hi = bounds.get(str(i)), bounds.get(str(i + 1))
            if stage.drop_above is None or lo is None or hi is None:
                continue  # a stage whose draws this sampler did not count (a state from before the counts)
            rates, recorded = lc.stage_pass_rates(sampler.ledger, lo, hi)
            dropped |= {pid for pid, r in rates.items() if r > stage.drop_above}
            complete = complete and recorded >= hi
        self._stage_dropped = dropped
        self._stage_cache = current if complete else None

    def domain_weights(self, base: Mapping[str, float]) -> dict[str, float]:
        return dict(base) if self._weights is None else dict(self._weights)

    # ------------------------------------------------------------------------------------ drawing
    def _rng(self, sampler: Sampler, tag: str) -> random.Random:
        state = sampler.policy_state
        state["n"] += 1
        return random.Random(f"{self.seed}:{tag}:{state['n']}")

    def draw(self, sampler: Sampler, domain: str, retired: Mapping[str, int]) -> str | None:
        pid = self._draw(sampler, domain, retired)
        if pid is not None:  # the groups drawn so far: the clock of a stage's samples (_update_stage_drops)
            state = sampler.policy_state
            state["draws"] = int(state.get("draws", 0)) + 1
        return pid

    def _draw(self, sampler: Sampler, domain: str, retired: Mapping[str, int]) -> str | None:
        pid = self._readmission(sampler, domain)
        if pid is not None:
            return pid
        last = None
        for _ in range(len(sampler.domain_ids(domain)) + 1):
            pid = self._candidate(sampler, domain, retired)
            if pid is None:
                return last
            reason = self._refusal(sampler, pid)
            if reason is None:
                return pid
            self._count(reason)
            last = pid
        self._count("forced")
        return last

    def _count(self, event: str, n: int = 1) -> None:
        with self._lock:
            self.events[event] += n

    def _readmission(self, sampler: Sampler, domain: str) -> str | None:
        cfg, state = self.cfg.readmission, sampler.policy_state
        if cfg.mode == "resume_fraction" and state["queue"]:
            if self._rng(sampler, "queue").random() < 1.0 / cfg.queue_every:
                mine = [i for i, pid in enumerate(state["queue"]) if sampler.problem(pid).domain == domain]
                if mine:
                    self._count("readmitted")
                    return state["queue"].pop(mine[0])
        if cfg.mode == "probe":
            rng = self._rng(sampler, "probe")
            if rng.random() < cfg.probe_probability:
                pool = sorted(pid for pid in sampler.retired_ids() if (problem := sampler.problem(pid)) is not None
                              and problem.domain == domain and pid not in sampler.holdout_ids)
                if pool:
                    self._count("probed")
                    return pool[rng.randrange(len(pool))]
        return None

    def _candidate(self, sampler: Sampler, domain: str, retired: Mapping[str, int]) -> str | None:
        """The next prompt of the epoch: the seeded permutation (uniform), or a weighted pick among the
        epoch's remaining prompts (priority)."""
        if self.cfg.priority.mode == "uniform":
            return sampler.walk(domain, retired)
        if self.cfg.priority.replacement:
            return self._with_replacement(sampler, domain, retired)
        drawn = sampler.policy_state["drawn"]
        for _ in range(2):
            if sampler.domain_state(domain)["epoch"] < 0:
                sampler.start_epoch(domain, retired)
                drawn[domain] = []
            seen = set(drawn.setdefault(domain, []))
            left = [pid for pid in sampler.epoch_order(domain, retired) if pid not in seen and pid not in retired]
            if left:
                pid = st.weighted_pick(left, self._priority(left), self._rng(sampler, f"pick:{domain}"))
                drawn[domain].append(pid)
                sampler.domain_state(domain)["cursor"] = len(drawn[domain])
                return pid
            sampler.start_epoch(domain, retired)
            drawn[domain] = []
            if sampler.domain_state(domain)["exhausted"]:
                return None
        return None

    def _with_replacement(self, sampler: Sampler, domain: str, retired: Mapping[str, int]) -> str | None:
        """A weighted pick among every active prompt of the domain (no epoch bookkeeping beyond the first)."""
        if sampler.domain_state(domain)["epoch"] < 0:
            sampler.start_epoch(domain, retired)
        active = [pid for pid in sampler.domain_ids(domain) if pid not in retired]
        if not active:
            sampler.start_epoch(domain, retired)  # marks the domain exhausted
            return None
        mix = sampler.mixes.get(domain)
        if mix is not None:  # the source by its weight first, so priorities never shift the source shares
            live = {sampler.source_of[pid] for pid in active}
            source = st.weighted_pick([s for s in mix.weights if s in live], mix.weights,
                                      self._rng(sampler, f"source:{domain}"))
            active = [pid for pid in active if sampler.source_of[pid] == source]
        return st.weighted_pick(active, self._priority(active), self._rng(sampler, f"pick:{domain}"))

    def _priority(self, candidates: list[str]) -> Mapping[str, float]:
        """Draw weights of the candidates (p read once per batch; per-prompt weights cached for the batch
        except for pools, whose weights depend on the pools' current sizes)."""
        cfg, cache = self.cfg.priority, self._p_cache
        for pid in candidates:
            if pid not in cache:
                r = self._rates.get(pid)
                correct, scored = (0, 0) if r is None else (
                    (r.correct, r.scored) if cfg.window == "all" else (r.last_group_correct, r.last_group_scored))
                cache[pid] = st.pass_rate_estimate(correct, scored, self.prior.get(pid), cfg.unseen_pass_rate)
        if cfg.mode == "pools":
            return st.priority_weights({pid: cache[pid] for pid in candidates}, cfg)
        missing = {pid: cache[pid] for pid in candidates if pid not in self._w_cache}
        self._w_cache.update(st.priority_weights(missing, cfg))
        return self._w_cache

    def _refusal(self, sampler: Sampler, pid: str) -> str | None:
        """Why `pid` is passed over this time (None: it is drawn)."""
        if pid in self._stage_dropped:
            return "stage_dropped"
        if self.cfg.stages and not st.in_level(self.prior.get(pid), self.cfg.stages[self._stage(sampler)]):
            return "out_of_level"
        side = st.benched(self._windows.get(pid), self.cfg.bench)
        if side is not None:
            return f"benched_{side}"
        streak, easy = self._streaks.get(pid, (0, False))
        if streak:
            prob = st.SKIPS[self.cfg.skip.mode](streak, easy, *self._p)
            if self._rng(sampler, f"skip:{pid}").random() < prob:
                return "skipped_easy" if easy else "skipped_hard"
        return None

    # ------------------------------------------------------------------------------------ reporting
    def take_metrics(self, prefix: str = "curriculum/") -> dict[str, float]:
        """Events since the last call (then reset) and the current gauges, for one metrics line."""
        with self._lock:
            out = {f"{prefix}{k}": float(v) for k, v in sorted(self.events.items())}
            out.update({f"{prefix}{k}": float(v) for k, v in self.gauges.items()})
            self.events.clear()
        return out


def policy_for(cfg: StrategyConfig, seed: int) -> CurriculumPolicy | None:
    """The sampler's strategy hook, or None under ScaleRL's defaults (the sampler's plain walk): the one
    builder for `scalerl train` and the curriculum service."""
    if not cfg.sampler_active:
        return None
    prior = lc.profile_prior(cfg.prior_ledger) if cfg.prior_ledger else None
    return CurriculumPolicy(cfg, seed=seed, prior=prior)
