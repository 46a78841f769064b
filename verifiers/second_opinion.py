"""The live second opinion: a sampled share of negative verdicts checked again by another judge.

`review(items, verdicts, config, verifiers)` runs in the pool (`scalerl.verifiers.batch`) once a batch's
verdicts are in. Each domain's share is `verifier.<domain>.second_opinion`; an item is sampled when a hash
of (domain, prompt_id, reference answer, completion) falls below it, so a re-run samples the same items
and identical completions of one prompt share one decision. The judges, per domain (`CHECKS`):

- math: plain math-verify with its defaults on the whole completion, `verify(parse("$\\boxed{answer}$"),
  parse(completion))` (benchmarks/bench_math.py's baseline), in the math worker processes under their
  hard deadline; it re-checks `wrong`, `no_answer`, `unparsable` and `timeout` verdicts.
- if: IFEval's loose mode, its own second accuracy, which the verifier computes with every verdict
  (`details.loose`); it re-checks `wrong` verdicts.
- code: `timeout` verdicts only, run again in the sandbox with `second_opinion_time_factor` x the time
  limit (at most the largest `Limits.time_s` an item may set).

Result: `details["second_opinion"]` is "accepts" or "rejects", `details["second_opinion_by"]` names the
judge. Guaranteed: the verdict's status and reward never change (a measurement, not a reward); a second
judge that fails (a crashed worker, a sandbox error, a closed pool) leaves the verdict without a second
opinion, never an exception. Not guaranteed: that the second judge is right (plain math-verify accepts
some wrong answers too: docs/math.md), nor opinions for plug-in domains (no judge is registered).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scalerl.env.contracts.records import Limits, Status, Verdict, VerifyItem
from scalerl.verifiers.verifier_config import CodeConfig, VerifierConfig

logger = logging.getLogger(__name__)

ACCEPTS, REJECTS = "accepts", "rejects"
Opinions = Callable[[], list[bool | None]]  # per item: accepted, rejected, or None (the judge failed)


def sampled(item: VerifyItem, fraction: float) -> bool:
    """Whether `item` is in the `fraction` re-checked: deterministic in the item's prompt and completion."""
    if fraction <= 0:
        return False
    if fraction >= 1:
        return True
    key = "\0".join((item.domain, item.prompt_id or "", item.answer or "", item.completion))
    draw = int.from_bytes(hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()[:8], "big") / 2**64
    return draw < fraction


def _math(items: list[VerifyItem], verdicts: list[Verdict], section: Any, verifier: Any) -> Opinions:
    futures = [verifier.plain_math_verify(item.answer or "", item.completion) for item in items]

    def collect() -> list[bool | None]:
        replies = [f.result().get("status") for f in futures]
        return [None if status == "error" else status == "correct" for status in replies]

    return collect


def _if(items: list[VerifyItem], verdicts: list[Verdict], section: Any, verifier: Any) -> Opinions:
    return lambda: [v.details["loose"] if isinstance(v.details.get("loose"), bool) else None for v in verdicts]


def longer_limits(limits: Limits | None, config: CodeConfig) -> Limits:
    """The re-run's limits: `second_opinion_time_factor` x the time limit, within what an item may set."""
    limits = limits or Limits()
    most = next(m.le for m in Limits.model_fields["time_s"].metadata if getattr(m, "le", None) is not None)
    return limits.model_copy(update={"time_s": min(limits.time_s * config.second_opinion_time_factor, most)})


def _code(items: list[VerifyItem], verdicts: list[Verdict], section: Any, verifier: Any) -> Opinions:
    longer = [item.model_copy(update={"limits": longer_limits(item.limits, section)}) for item in items]

    def collect() -> list[bool | None]:  # the sandbox runs here, while the math workers judge theirs
        return [None if v.status is Status.error else v.status is Status.correct for v in verifier.submit(longer)()]

    return collect


@dataclass(frozen=True)
class SecondCheck:
    """A domain's second judge: which verdicts it re-checks, its name in details, and how it starts."""

    statuses: frozenset[Status]
    by: str
    start: Callable[[list[VerifyItem], list[Verdict], Any, Any], Opinions]


NEGATIVE = frozenset({Status.wrong, Status.no_answer, Status.unparsable, Status.timeout})
CHECKS: dict[str, SecondCheck] = {
    "math": SecondCheck(NEGATIVE, "plain_math_verify", _math),
    "if": SecondCheck(frozenset({Status.wrong}), "ifeval_loose", _if),
    "code": SecondCheck(frozenset({Status.timeout}), "code_longer_time_limit", _code),
}


def _picked(items: Sequence[VerifyItem], verdicts: Sequence[Verdict], config: VerifierConfig) -> dict[str, list[int]]:
    fractions: dict[str, float] = {}
    picked: dict[str, list[int]] = {}
    for i, (item, verdict) in enumerate(zip(items, verdicts)):
        check = CHECKS.get(item.domain)
        if check is None or verdict.status not in check.statuses:
            continue
        if item.domain not in fractions:
            fractions[item.domain] = float(getattr(config.section(item.domain), "second_opinion", 0.0))
        if sampled(item, fractions[item.domain]):
            picked.setdefault(item.domain, []).append(i)
    return picked


def review(items: Sequence[VerifyItem], verdicts: list[Verdict], config: VerifierConfig,
           verifiers: dict[str, Any]) -> list[Verdict]:
    """`verdicts` with a second opinion in the details of the sampled negative ones (module docstring)."""
    picked = _picked(items, verdicts, config)
    started: list[tuple[str, list[int], Opinions]] = []
    for domain, indices in picked.items():
        try:
            opinions = CHECKS[domain].start([items[i] for i in indices], [verdicts[i] for i in indices],
                                            config.section(domain), verifiers.get(domain))
            started.append((domain, indices, opinions))
        except Exception:  # a measurement must never cost the verdicts
            logger.exception("the %s second opinion failed to start", domain)
    out = list(verdicts)
    for domain, indices, opinions in started:
        try:
            results = opinions()
        except Exception:
            logger.exception("the %s second opinion failed", domain)
            continue
        for i, accepted in zip(indices, results):
            if accepted is not None:
                details = {**out[i].details, "second_opinion": ACCEPTS if accepted else REJECTS,
                           "second_opinion_by": CHECKS[domain].by}
                out[i] = out[i].model_copy(update={"details": details})
    return out
