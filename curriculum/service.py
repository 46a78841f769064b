"""The curriculum as a service: registered problem sets, each drawn by `scalerl.curriculum.sampler.Sampler` under
the `curriculum.*` strategies, for trainers that are not `scalerl train` (the reward server's
`/v1/curriculum/*` routes and `scalerl.env.curriculum_client` sit on top of this).

Each set is one `Sampler` on the server's ledger (`sampler_state` name `curriculum/NAME`) with the
`CurriculumPolicy` that `scalerl train` builds from the same settings (`scalerl.curriculum.policy.policy_for`);
retirement is
the ledger's rule, fed by every verdict recorded with a `prompt_id` (the reward server's `/v1/verify`)
and by groups reported here. A draw (`draw_id`, shared by the data-parallel ranks of one step) is one
sampler batch of `world_size × n` distinct prompts; rank r gets slice r.

Guarantees
- Within one draw no prompt goes to two ranks (and none twice to one rank): the batch is made of
  distinct prompts (when the sampler repeats one, e.g. an epoch wraps inside the batch, further sampler
  batches top it up; too few active prompts is a `SetConflictError`, nothing is handed out).
- Idempotent: the same (`draw_id`, `rank`) gets the same prompts, also after a restart (every draw is
  committed to `curriculum_draws` before it is answered). Draws with new ids continue the plan in the
  order they arrive, whatever their numbers.
- A prompt retired before a draw is made is in no later draw (unless `curriculum.readmission` brings
  it back on purpose). A draw already made is answered as made, so a rank fetching it after a
  retirement still gets the prompts it was made of.
- Restart: the sets, their members and the sampler state come back from the ledger, so the next draw
  continues the same epoch order as if the server had not stopped (for the seeded uniform walk and every
  strategy whose inputs are in the ledger).
- A draw is committed in one transaction with the sampler state it leaves: a draw that fails or is
  refused (too few prompts), or a crash before its commit, changes nothing, and asking it again (after a
  restart too) makes the draw the uninterrupted plan would have made.
Not guaranteed: strategy counts (GRESO, bench, learning progress) are read from the whole ledger: sets
that share prompt ids, or a trainer recording the same ids, share their history.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from scalerl.curriculum.ledger import sets as stored
from scalerl.curriculum.ledger.store import Ledger
from scalerl.curriculum.policy import policy_for
from scalerl.curriculum.sampler import Sampler, SamplerExhausted
from scalerl.curriculum.service_models import (
    DrawnPrompt,
    DrawRequest,
    DrawResponse,
    ReportRequest,
    ReportResponse,
    SetDomainCounts,
    SetState,
    SetSummary,
)
from scalerl.curriculum.strategies import stage_index
from scalerl.curriculum.strategy_config import StrategyConfig
from scalerl.env.contracts.records import DEFAULT_REWARDS, ProblemRecord, Status

SAMPLER_PREFIX = "curriculum/"
MAX_TOP_UPS = 8  # sampler batches after the first that may top a draw up to distinct prompts
CORRECT_AT = DEFAULT_REWARDS.reward(Status.correct)  # a reported sample without `correct` is correct at >= this


class ServiceError(Exception):
    status = 400


class UnknownSetError(ServiceError):
    status = 404


class SetConflictError(ServiceError):
    status = 409


class SetInputError(ServiceError):
    """Input the models accept but the service cannot: `field` is its dotted path in the request."""

    status = 422

    def __init__(self, field: str, msg: str) -> None:
        super().__init__(f"{field}: {msg}")
        self.field, self.msg = field, msg


class MissingInputError(SetInputError):
    """A field naming what does not exist (a prompt the set does not hold, a file the server does not
    have): the request is well formed, its target is not found."""

    status = 404


@dataclass(frozen=True)
class Member:
    """One prompt of a set; `record` is the whole problem when the set was registered with it."""

    prompt_id: str
    domain: str
    source: str
    split: str
    record: ProblemRecord | None = None

    def row(self) -> tuple[str, str, str, str, str | None]:
        return (self.prompt_id, self.domain, self.source, self.split,
                None if self.record is None else self.record.model_dump_json())

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Member:
        pid, domain, source, split, record = row
        return cls(pid, domain, source, split, None if record is None else ProblemRecord.model_validate_json(record))

    def problem(self) -> ProblemRecord:
        """What the sampler walks: the record, or (ids only) a record of id, domain and source; the sampler
        and its policy read only those."""
        if self.record is not None:
            return self.record
        return ProblemRecord.model_construct(prompt_id=self.prompt_id, domain=self.domain, source=self.source,
                                             prompt=[], answer=None, tests=None, limits=None, difficulty_prior=None,
                                             metadata={})


def resolve_settings(raw: Mapping[str, Any]) -> StrategyConfig:
    """`curriculum.*` settings from nested or dotted keys (a leading `curriculum.` is optional)."""
    tree: dict[str, Any] = {}
    for key, value in raw.items():
        path = [p for p in str(key).split(".") if p]
        path = path[1:] if path[:1] == ["curriculum"] else path
        if not path:
            raise SetInputError("curriculum", f"empty key {key!r}")
        if path[0] == "retirement":
            raise SetInputError("curriculum.retirement", "retirement is the rule of the server's ledger, the same "
                                "for every set; it cannot be set per set")
        node = tree
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        if isinstance(value, dict) and isinstance(node.get(path[-1]), dict):
            node[path[-1]] = {**node[path[-1]], **value}
        else:
            node[path[-1]] = value
    try:
        return StrategyConfig.model_validate(tree)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise SetInputError(f"curriculum.{loc}" if loc else "curriculum", err["msg"]) from None


def _domain_weights(members: Sequence[Member], weights: Mapping[str, float]) -> dict[str, float]:
    if weights:  # zero weights leave the mix (as the sampler drops them)
        return {d: float(w) for d, w in sorted(weights.items()) if w != 0}
    return {d: 1.0 for d in sorted({m.domain for m in members if m.split == "train"})}


class _HeldStates:
    """The ledger as a set's Sampler sees it: everything passes through, except that the sampler's state
    commits are held back, so a draw commits them with its own row in one transaction (`sets.save_draw`)."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self.state: tuple[str, dict[str, Any]] | None = None
        self.epochs: list[tuple] = []

    def save_sampler_state(self, name: str, state: dict[str, Any], new_epochs: Sequence[tuple] = ()) -> None:
        self.state = (name, state)
        self.epochs.extend(new_epochs)

    def clear(self) -> None:
        self.state, self.epochs = None, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)


class CurriculumSet:
    """One registered set: its members, sampler, policy and draws. Draws are serialised by a lock."""

    def __init__(self, ledger: Ledger, name: str, seed: int, weights: Mapping[str, float],
                 settings: StrategyConfig, members: Sequence[Member]) -> None:
        self.ledger, self.name, self.seed, self.settings = ledger, name, int(seed), settings
        self.members = {m.prompt_id: m for m in members}
        self.policy = policy_for(settings, self.seed)
        holdout = {m.prompt_id for m in members if m.split == "heldout"}
        self._held = _HeldStates(ledger)
        try:
            self.sampler = Sampler([m.problem() for m in members], weights=_domain_weights(members, weights),
                                   seed=self.seed, ledger=self._held, holdout_ids=holdout,
                                   name=SAMPLER_PREFIX + name, policy=self.policy)
        except ValueError as exc:
            raise SetInputError("domain_weights", str(exc)) from None
        self._draws = stored.load_draws(ledger, name)
        self._lock = threading.Lock()
        self.events: Counter[str] = Counter()

    def spec(self) -> tuple:
        """What registering this set again must match."""
        return (self.seed, self.sampler.weights, self.settings.model_dump(mode="json"),
                sorted(m.row() for m in self.members.values()))

    # ------------------------------------------------------------------------------------------ draws
    def draw(self, req: DrawRequest) -> DrawResponse:
        if req.rank >= req.world_size:
            raise SetInputError("rank", f"rank {req.rank} is not below world_size {req.world_size}")
        with self._lock:
            made = self._draws.get(req.draw_id)
            if made is None:
                made = self._make(req.draw_id, req.world_size, req.n)
            elif made[:2] != (req.world_size, req.n):
                raise SetConflictError(f"draw {req.draw_id} of set {self.name!r} was made for world_size={made[0]}, "
                                       f"n={made[1]}; this request asks world_size={req.world_size}, n={req.n}")
        world, n, ids, batches = made
        prompts = [self._drawn(pid) for pid in ids[req.rank * n:(req.rank + 1) * n]]
        return DrawResponse(name=self.name, draw_id=req.draw_id, rank=req.rank, world_size=world, batch=batches + 1,
                            stage=stage_index(batches, self.settings.stages), prompts=prompts)

    def _make(self, draw_id: int, world_size: int, n: int) -> tuple[int, int, list[str], int]:
        """Draw, then commit the draw with the sampler state it leaves (one transaction); on any failure the
        sampler goes back to its state before the draw, so a refused or failed draw changes nothing."""
        need, before = world_size * n, self.sampler.batches
        active = self._active()
        if need > active and self.settings.readmission.mode == "none":
            raise SetConflictError(f"a draw of world_size × n = {need} distinct prompts, but set {self.name!r} has "
                                   f"{active} active training prompts left")
        start = json.loads(json.dumps(self.sampler.state_dict()))  # detached: state_dict() shares `credit`
        try:
            ids = self._distinct(need)
            stored.save_draw(self.ledger, self.name, draw_id, world_size, n, ids, before, self._held.state,
                             self._held.epochs)
        except BaseException:
            self.sampler.load_state_dict(start)
            raise
        finally:
            self._held.clear()
            self._take_events()
        made = (world_size, n, ids, before)
        self._draws[draw_id] = made
        return made

    def _distinct(self, need: int) -> list[str]:
        ids: list[str] = []
        try:
            for _ in range(1 + MAX_TOP_UPS):
                for p in self.sampler.next_batch(need - len(ids)):
                    if p.prompt_id not in ids:
                        ids.append(p.prompt_id)
                if len(ids) == need:
                    return ids
        except SamplerExhausted as exc:
            raise SetConflictError(f"set {self.name!r}: {exc}") from None
        raise SetConflictError(f"set {self.name!r}: {len(ids)} distinct prompts after {1 + MAX_TOP_UPS} sampler "
                               f"batches, {need} needed; draw fewer (n × world_size)")

    def _take_events(self) -> None:
        if self.policy is not None:
            metrics = self.policy.take_metrics(prefix="")
            self.events.update({k: int(v) for k, v in metrics.items() if k not in self.policy.gauges})

    def _active(self) -> int:
        retired = self.ledger.retired_ids()
        return sum(1 for m in self.members.values() if m.split == "train" and m.domain in self.sampler.weights
                   and m.prompt_id not in retired)

    def _drawn(self, pid: str) -> DrawnPrompt:
        m = self.members[pid]
        r = m.record
        return DrawnPrompt(prompt_id=pid, domain=m.domain, source=m.source, prompt=None if r is None else r.prompt,
                           answer=None if r is None else r.answer, tests=None if r is None else r.tests,
                           limits=None if r is None else r.limits)

    # ------------------------------------------------------------------------------------------ outcomes
    def report(self, req: ReportRequest) -> ReportResponse:
        """Record each group's samples in the ledger (one transaction); the ledger's rule retires."""
        cols: dict[str, list[Any]] = {k: [] for k in ("prompt_id", "domain", "step", "sample_index", "reward",
                                                      "status", "correct")}
        step = req.step if req.step is not None else self.sampler.batches
        zero_variance = 0
        for i, g in enumerate(req.groups):
            m = self.members.get(g.prompt_id)
            if m is None:
                raise MissingInputError(f"groups.{i}.prompt_id",
                                        f"{g.prompt_id!r} is not a prompt of set {self.name!r}")
            if g.correct is not None and len(g.correct) != len(g.rewards):
                raise SetInputError(f"groups.{i}.correct", f"{len(g.correct)} flags for {len(g.rewards)} rewards")
            bad = next((j for j, r in enumerate(g.rewards) if not math.isfinite(r)), None)
            if bad is not None:
                raise SetInputError(f"groups.{i}.rewards.{bad}", "reward is not a finite number")
            flags = g.correct if g.correct is not None else [r >= CORRECT_AT for r in g.rewards]
            zero_variance += min(g.rewards) == max(g.rewards)
            for j, (reward, ok) in enumerate(zip(g.rewards, flags)):
                for key, value in (("prompt_id", m.prompt_id), ("domain", m.domain), ("step", step),
                                   ("sample_index", j), ("reward", float(reward)),
                                   ("status", "correct" if ok else "wrong"), ("correct", bool(ok))):
                    cols[key].append(value)
        touched = {g.prompt_id for g in req.groups}
        before = self.ledger.retired_ids() & touched
        recorded = self.ledger.record_attempts(cols)
        newly = (self.ledger.retired_ids() & touched) - before
        order = self.ledger.retired_seq()
        return ReportResponse(recorded=recorded, groups=len(req.groups), zero_variance=zero_variance,
                              retired=sorted(newly, key=lambda pid: order[pid]))

    # ------------------------------------------------------------------------------------------ state
    def summary(self, created: bool = False) -> SetSummary:
        retired = self.ledger.retired_ids()
        train = [m for m in self.members.values() if m.split == "train"]
        return SetSummary(name=self.name, seed=self.seed, domain_weights=dict(self.sampler.weights), train=len(train),
                          heldout=len(self.members) - len(train), retired=sum(m.prompt_id in retired for m in train),
                          batches=self.sampler.batches, draws=len(self._draws), created=created)

    def state(self) -> SetState:
        with self._lock:
            order = self.ledger.retired_seq()
            domains: dict[str, SetDomainCounts] = {}
            epochs = self.sampler.epochs()
            for d in sorted({m.domain for m in self.members.values()}):
                mine = [m for m in self.members.values() if m.domain == d]
                train = [m for m in mine if m.split == "train"]
                retired = sum(m.prompt_id in order for m in train)
                domains[d] = SetDomainCounts(train=len(train), heldout=len(mine) - len(train), retired=retired,
                                          active=len(train) - retired, epoch=epochs.get(d, -1))
            retired_ids = sorted((pid for pid, m in self.members.items() if pid in order and m.split == "train"),
                                 key=lambda pid: order[pid])
            weights = self.policy.domain_weights(self.sampler.weights) if self.policy else dict(self.sampler.weights)
            gauges = dict(self.policy.gauges) if self.policy else {}
            return SetState(summary=self.summary(), settings=self.settings.model_dump(mode="json"), domains=domains,
                            retired_ids=retired_ids, weights=weights, gauges=gauges, events=dict(self.events),
                            stage=stage_index(self.sampler.batches, self.settings.stages))


class CurriculumService:
    """Every set registered in one ledger (loaded from it at construction: a restarted server resumes)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._lock = threading.Lock()
        self._sets: dict[str, CurriculumSet] = {}
        for name, seed, weights, settings in stored.load_sets(ledger):
            members = [Member.from_row(row) for row in stored.load_members(ledger, name)]
            self._sets[name] = CurriculumSet(ledger, name, seed, weights, StrategyConfig.model_validate(settings),
                                             members)

    def register(self, name: str, members: Sequence[Member], *, seed: int = 0,
                 domain_weights: Mapping[str, float] | None = None,
                 curriculum: Mapping[str, Any] | None = None, field: str = "records") -> SetSummary:
        """Create the set, or return it unchanged when it exists with exactly this spec (so every rank may
        register at start-up); the same name with another spec is a `SetConflictError`."""
        settings = resolve_settings(curriculum or {})
        seen: set[str] = set()
        for i, m in enumerate(members):
            if m.prompt_id in seen:
                raise SetInputError(f"{field}.{i}.prompt_id", f"duplicate prompt_id {m.prompt_id!r}")
            seen.add(m.prompt_id)
        if not any(m.split == "train" for m in members):
            raise SetInputError(field, "the set has no training prompts (split 'train')")
        with self._lock:
            existing = self._sets.get(name)
            if existing is None:
                new = CurriculumSet(self.ledger, name, seed, domain_weights or {}, settings, members)
                stored.save_set(self.ledger, name, new.seed, new.sampler.weights, settings.model_dump(mode="json"),
                                [m.row() for m in members])
                self.ledger.upsert_problems([m.record for m in members if m.record is not None])
                self._sets[name] = new
                return new.summary(created=True)
        probe = (int(seed), _domain_weights(members, domain_weights or {}), settings.model_dump(mode="json"),
                 sorted(m.row() for m in members))
        if probe != existing.spec():
            raise SetConflictError(f"set {name!r} is already registered with other prompts or settings; "
                                   "register under another name")
        return existing.summary()

    def get(self, name: str) -> CurriculumSet:
        found = self._sets.get(name)
        if found is None:
            known = ", ".join(sorted(self._sets)) or "none"
            raise UnknownSetError(f"no curriculum set {name!r} is registered (registered: {known})")
        return found

    def summaries(self) -> list[SetSummary]:
        return [s.summary() for _, s in sorted(self._sets.items())]
