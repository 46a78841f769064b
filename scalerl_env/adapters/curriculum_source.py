"""Where the TRL and veRL curriculum drop-ins get their prompts: a `CurriculumSource`.

A source answers two calls: `draw(n)` (the next n prompt ids of the plan, for the whole batch of the
trainer's driver process) and `report(groups, step=)` (each group's rewards, so the ledger's pass
rates, retirements and the strategies' counts follow training). Two implementations:

- `LocalCurriculum`: in this process, on a ledger file this process owns — `scalerl.curriculum.sampler.Sampler`
  with the `curriculum.*` strategies (`StrategyConfig`) as `scalerl train` runs them.
- `ServiceCurriculum`: a set of the reward server's curriculum routes, through
  `scalerl.env.curriculum_client.CurriculumClient` (one ledger shared by every trainer process that
  talks to the server; a restarted trainer resumes the set's plan).

Guarantees (both): a prompt retired in the ledger before a `draw` is not in that draw's ids (the
sampler skips retired prompts; re-admission strategies re-admit on purpose); held-out ids are never
drawn. A group's sample counts as correct when its reward is at least `correct_at` (1.0), the reward
table's reward for `correct`.
Not guaranteed: that a prompt drawn and then retired before it is generated for is taken back (so
the drop-ins draw as late as the trainer allows: the TRL one at generation time).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import Field
from scalerl.curriculum.ledger.retirement import RetirementConfig
from scalerl.curriculum.ledger.store import Ledger
from scalerl.curriculum.policy import CurriculumPolicy
from scalerl.curriculum.sampler import Sampler
from scalerl.curriculum.strategy_config import StrategyConfig
from scalerl.env.adapters import AdapterInputError, id_text, plain, reference_item
from scalerl.env.contracts.records import DEFAULT_REWARDS, ProblemRecord, Status, Strict

CORRECT_AT = DEFAULT_REWARDS.reward(Status.correct)


class GroupOutcome(Strict):
    """One prompt's group: the rewards of its samples, in sample order."""

    prompt_id: str = Field(min_length=1)
    rewards: list[float] = Field(min_length=1)


@runtime_checkable
class CurriculumSource(Protocol):
    def draw(self, n: int) -> list[str]:
        """The next `n` prompt ids of the plan."""

    def report(self, groups: Sequence[GroupOutcome], *, step: int) -> None:
        """Record each group's rewards under training step `step`."""

    def retired(self) -> set[str]:
        """Prompt ids retired for good (as of now)."""

    def metrics(self) -> dict[str, float]:
        """The strategies' events since the last call and their gauges (`curriculum/...`)."""


class LocalCurriculum:
    """The sampler and its strategies in this process, on `ledger` (a path this process owns, or a Ledger)."""

    def __init__(self, problems: Sequence[ProblemRecord], *, ledger: Ledger | str | Path,
                 strategies: StrategyConfig | None = None, retirement: RetirementConfig | None = None,
                 weights: Mapping[str, float] | None = None, seed: int = 0, holdout_ids: Sequence[str] = (),
                 name: str = "train", resume: bool = True, correct_at: float = CORRECT_AT) -> None:
        self.strategies = strategies or StrategyConfig()
        self.ledger = ledger if isinstance(ledger, Ledger) else Ledger(ledger, retirement=retirement)
        self.ledger.upsert_problems(list(problems))
        self.domain_of = {p.prompt_id: p.domain for p in problems}
        self.correct_at = float(correct_at)
        weights = dict(weights) if weights is not None else {d: 1.0 for d in sorted(set(self.domain_of.values()))}
        self.policy = CurriculumPolicy(self.strategies, seed=seed) if self.strategies.sampler_active else None
        self.sampler = Sampler(list(problems), weights=weights, seed=seed, ledger=self.ledger,
                               holdout_ids=frozenset(holdout_ids), name=name, resume=resume, policy=self.policy)

    def draw(self, n: int) -> list[str]:
        return [p.prompt_id for p in self.sampler.next_batch(n)]

    def report(self, groups: Sequence[GroupOutcome], *, step: int) -> None:
        rows = attempt_rows(groups, self.domain_of, step=step, correct_at=self.correct_at)
        if rows["prompt_id"]:
            self.ledger.record_attempts(rows)

    def retired(self) -> set[str]:
        return set(self.ledger.retired_ids())

    def metrics(self) -> dict[str, float]:
        out = self.policy.take_metrics() if self.policy is not None else {}
        out["curriculum/retired"] = float(len(self.ledger.retired_ids()))
        return out

    def close(self) -> None:
        self.ledger.close()


class ServiceCurriculum:
    """A set of the reward server's curriculum (`client`: a `scalerl.env.curriculum_client.CurriculumClient`
    bound to the set, registered). Each `draw` is a new `draw_id`, counting on from the set's draws so far
    (a restarted trainer does not get old draws back). With `report=False` groups are not reported: use it
    when the rewards are scored by the same server with `prompt_id`, whose ledger already records them."""

    def __init__(self, client: Any, *, rank: int = 0, world_size: int = 1, report: bool = True,
                 correct_at: float = CORRECT_AT, first_draw_id: int | None = None) -> None:
        self.client, self.rank, self.world_size = client, int(rank), int(world_size)
        self.report_groups, self.correct_at = report, float(correct_at)
        self.next_draw_id = client.state().summary.draws if first_draw_id is None else int(first_draw_id)

    def draw(self, n: int) -> list[str]:
        batch = self.client.draw(n, draw_id=self.next_draw_id, rank=self.rank, world_size=self.world_size)
        self.next_draw_id += 1
        return [p.prompt_id for p in batch.prompts]

    def report(self, groups: Sequence[GroupOutcome], *, step: int) -> None:
        if self.report_groups and groups:
            # the correct flags sent explicitly, so both sources count a sample correct by the same rule
            self.client.report([{"prompt_id": g.prompt_id, "rewards": g.rewards,
                                 "correct": [r >= self.correct_at for r in g.rewards]} for g in groups], step=step)

    def retired(self) -> set[str]:
        return set(self.client.state().retired_ids)

    def metrics(self) -> dict[str, float]:
        state = self.client.state()
        out = {f"curriculum/{k}": float(v) for k, v in state.gauges.items()}
        out["curriculum/retired"] = float(len(state.retired_ids))
        return out


def problem_record(prompt_id: Any, prompt: Any, reference: Any, *, domain: str | None = None, source: str,
                   loc: tuple[str | int, ...]) -> ProblemRecord:
    """A trainer's dataset row as a problem record: `prompt` text or chat messages, the reference in any
    form `scalerl.env.adapters.reference_item` reads; errors name the row (`loc`)."""
    pid = id_text(prompt_id, (*loc, "prompt_id"))
    if not pid:
        raise AdapterInputError((*loc, "prompt_id"), "every row needs a prompt id")
    item = reference_item("", reference, loc=(*loc, "reference"), domain=domain)
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [
        {"role": m["role"], "content": m["content"]} for m in plain(prompt)]
    return ProblemRecord(prompt_id=pid, domain=item.domain, source=source, prompt=messages, answer=item.answer,
                         tests=item.tests, limits=item.limits)


SET_RECORD_FIELDS = {"prompt_id", "domain", "source", "prompt", "answer", "tests", "limits"}


def set_records(problems: Sequence[ProblemRecord]) -> list[dict[str, Any]]:
    """The problems as the curriculum service's inline set records (`CurriculumClient.register(records=)`)."""
    return [p.model_dump(mode="json", include=SET_RECORD_FIELDS, exclude_none=True) for p in problems]


def attempt_rows(groups: Sequence[GroupOutcome], domain_of: Mapping[str, str], *, step: int,
                 correct_at: float) -> dict[str, list[Any]]:
    """Ledger attempt columns for the groups (one row per sample); unknown prompt ids are an error."""
    cols: dict[str, list[Any]] = {k: [] for k in ("prompt_id", "domain", "step", "sample_index", "reward", "status")}
    for g, group in enumerate(groups):
        if group.prompt_id not in domain_of:
            raise KeyError(f"groups[{g}].prompt_id: {group.prompt_id!r} is not a problem of this curriculum")
        for i, reward in enumerate(group.rewards):
            status = Status.correct if reward >= correct_at else Status.wrong
            for key, value in zip(cols, (group.prompt_id, domain_of[group.prompt_id], step, i, float(reward),
                                         status.value)):
                cols[key].append(value)
    return cols
