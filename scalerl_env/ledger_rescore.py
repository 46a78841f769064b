"""`rescore`: score a ledger's stored completions again with the installed verifiers, beside the originals.

Each attempt with a stored completion (`ledger.store_completions`) and a problem the ledger knows (its
`problems` row or a curriculum member's record) becomes the verify item `ProblemRecord.verify_item`
builds (so math answer forms stated in the question are checked, as in training), is scored by the given
`VerifierPool`, and its new verdict goes into `rescores` under the pool's verifier version and settings
digest (`scalerl.verifiers.versions`). `attempts` is never written: the original verdict stays.

The report counts, per domain: attempts rescored, unchanged (same correct/not-correct outcome),
`correct_to_wrong` and `wrong_to_correct` flips (correct = status `correct`; every other status is
"wrong" here), and attempts not rescorable (no completion stored, or no problem to score it against). Flips
are also counted per rule: the rule of the verdict that accepts, i.e. the original's rule for a
correct → wrong flip (what accepted it before) and the new one's for wrong → correct (what accepts it
now); `(none)` when the verdict named no rule.

Not guaranteed: a verdict that depends on time (a code timeout, a math deadline) may flip between two runs
of the same version; re-scoring the same version again replaces that version's earlier rescore rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field
from scalerl.curriculum.ledger.rescores import StoredAttempt, stored_attempts, write_rescores
from scalerl.curriculum.ledger.store import Ledger
from scalerl.env.contracts.records import Status, Strict, Verdict

NO_RULE = "(none)"


class RuleFlips(Strict):
    correct_to_wrong: int = 0
    wrong_to_correct: int = 0


class DomainRescore(Strict):
    """One domain's outcome of a rescore."""

    verifier_version: str | None = Field(default=None, description="the version the new verdicts carry")
    settings_digest: str | None = None
    rescored: int = 0
    unchanged: int = 0
    correct_to_wrong: int = 0
    wrong_to_correct: int = 0
    no_completion: int = Field(default=0, description="not rescorable: no completion stored")
    no_reference: int = Field(default=0, description="not rescorable: no problem record for the prompt")
    by_rule: dict[str, RuleFlips] = Field(default_factory=dict, description="flips by the accepting verdict's rule")


class RescoreReport(Strict):
    """What `rescore` did, per domain (`scalerl-env ledger rescore --json` prints it)."""

    ledger: str
    domains: dict[str, DomainRescore] = Field(default_factory=dict)

    @property
    def flips(self) -> int:
        return sum(d.correct_to_wrong + d.wrong_to_correct for d in self.domains.values())


def rescore(ledger: Ledger, pool: Any, *, domain: str | None = None, limit: int | None = None,
            page_rows: int = 1024) -> RescoreReport:
    """Score the stored completions of `ledger` (of `domain`; its first `limit` attempts) with `pool` (a
    `VerifierPool`), write the verdicts to `rescores` and report the flips."""
    report = RescoreReport(ledger=str(ledger.path))
    for page in stored_attempts(ledger, domain=domain, limit=limit, page_rows=page_rows):
        todo = []
        for attempt in page:
            counts = report.domains.setdefault(attempt.domain, DomainRescore())
            if attempt.completion is None:
                counts.no_completion += 1
            elif attempt.problem is None:
                counts.no_reference += 1
            else:
                todo.append(attempt)
        if todo:
            items = [a.problem.verify_item(a.completion, id=str(a.attempt_id)) for a in todo]
            verdicts = pool.verify_batch(items)
            write_rescores(ledger, [_row(a, v) for a, v in zip(todo, verdicts)])
            _count(report, todo, verdicts)
    return report


def _row(attempt: StoredAttempt, verdict: Verdict) -> dict[str, Any]:
    details = verdict.details
    rule = details.get("rule")
    return {"attempt_id": attempt.attempt_id, "prompt_id": attempt.prompt_id, "domain": attempt.domain,
            "verifier_version": details["verifier_version"], "settings_digest": details["settings_digest"],
            "status": verdict.status.value, "reward": float(verdict.reward), "correct": verdict.correct,
            "rule": rule if isinstance(rule, str) else None}


def _count(report: RescoreReport, attempts: Sequence[StoredAttempt], verdicts: Sequence[Verdict]) -> None:
    for attempt, verdict in zip(attempts, verdicts):
        counts = report.domains[attempt.domain]
        counts.verifier_version = verdict.details["verifier_version"]
        counts.settings_digest = verdict.details["settings_digest"]
        counts.rescored += 1
        now = verdict.status is Status.correct
        if now == attempt.correct:
            counts.unchanged += 1
            continue
        rule = attempt.rule if attempt.correct else verdict.details.get("rule")
        flips = counts.by_rule.setdefault(rule if isinstance(rule, str) else NO_RULE, RuleFlips())
        if attempt.correct:
            counts.correct_to_wrong += 1
            flips.correct_to_wrong += 1
        else:
            counts.wrong_to_correct += 1
            flips.wrong_to_correct += 1
