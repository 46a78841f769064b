"""The live second opinion: a sampled share of negative verdicts checked again by another judge.

`review(items, verdicts, config, verifiers)` runs in the pool (`scalerl.verifiers.batch`) once a batch's
verdicts are in. A domain has a second judge when its verifier answers `second_judge()` with a
`SecondJudge` (which statuses it re-checks, its name, how it starts, or no start when the verifier
gives the opinion with its own verdicts, in the same dispatch: math); its share is
`verifier.<domain>.second_opinion`. An item is sampled when a hash of (domain, prompt_id, reference
answer, completion) falls below the share, so a re-run samples the same items and identical completions
of one prompt share one decision. The built-in judges (docs/domains.md):

- math (`scalerl.verifiers.math.verifier`): plain math-verify with its defaults on the whole completion,
  `verify(parse("$\\boxed{answer}$"), parse(completion))` (benchmarks/bench_math.py's baseline), in the
  math worker processes under their hard deadline; it re-checks `wrong`, `no_answer`, `unparsable` and
  `timeout` verdicts. The verifier samples with `sampled` below and queues each plain run as soon as the
  verdict is known to be negative, beside the batch's sympy work (no second round after the verdicts).
- if (`scalerl.verifiers.ifeval.verifier`): IFEval's loose mode, its own second accuracy, which the
  verifier computes with every verdict (`details.loose`); it re-checks `wrong` verdicts.
- code (`scalerl.verifiers.code.verifier`): `timeout` verdicts only, run again in the sandbox with
  `second_opinion_time_factor` x the time limit (at most the largest `Limits.time_s` an item may set).

Result: `details["second_opinion"]` is "accepts" or "rejects", `details["second_opinion_by"]` names the
judge. Guaranteed: the verdict's status and reward never change (a measurement, not a reward); a second
judge that fails (a crashed worker, a sandbox error, a closed pool) leaves the verdict without a second
opinion, never an exception. Not guaranteed: that the second judge is right (plain math-verify accepts
some wrong answers too: docs/math.md).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scalerl.env.contracts.records import Status, Verdict, VerifyItem
from scalerl.verifiers.verifier_config import VerifierConfig

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


@dataclass(frozen=True)
class SecondJudge:
    """A domain's second judge: the verdict statuses it re-checks, its name in details, and `start(items,
    verdicts)`, which begins the checks and returns their collector; `start` None: the verifier's verdicts
    carry the opinion already (`opinion_details`), and `review` leaves the domain alone."""

    statuses: frozenset[Status]
    by: str
    start: Callable[[list[VerifyItem], list[Verdict]], Opinions] | None = None


NEGATIVE = frozenset({Status.wrong, Status.no_answer, Status.unparsable, Status.timeout})


def opinion_details(details: dict[str, Any], accepted: bool, by: str) -> dict[str, Any]:
    """`details` with the second opinion's two keys."""
    return {**details, "second_opinion": ACCEPTS if accepted else REJECTS, "second_opinion_by": by}


def judges(verifiers: dict[str, Any]) -> dict[str, SecondJudge]:
    """The second judge of each domain whose verifier has one that `review` starts."""
    out = {}
    for domain, verifier in verifiers.items():
        judge = getattr(verifier, "second_judge", None)
        if judge is not None and (second := judge()).start is not None:
            out[domain] = second
    return out


def _picked(items: Sequence[VerifyItem], verdicts: Sequence[Verdict], config: VerifierConfig,
            by_domain: dict[str, SecondJudge]) -> dict[str, list[int]]:
    fractions: dict[str, float] = {}
    picked: dict[str, list[int]] = {}
    for i, (item, verdict) in enumerate(zip(items, verdicts)):
        judge = by_domain.get(item.domain)
        if judge is None or verdict.status not in judge.statuses:
            continue
        if item.domain not in fractions:
            fractions[item.domain] = float(getattr(config.section(item.domain), "second_opinion", 0.0))
        if sampled(item, fractions[item.domain]):
            picked.setdefault(item.domain, []).append(i)
    return picked


def review(items: Sequence[VerifyItem], verdicts: list[Verdict], config: VerifierConfig,
           verifiers: dict[str, Any]) -> list[Verdict]:
    """`verdicts` with a second opinion in the details of the sampled negative ones (module docstring)."""
    by_domain = judges({domain: verifiers.get(domain) for domain in {item.domain for item in items}})
    picked = _picked(items, verdicts, config, by_domain)
    started: list[tuple[str, list[int], Opinions]] = []
    for domain, indices in picked.items():
        try:
            opinions = by_domain[domain].start([items[i] for i in indices], [verdicts[i] for i in indices])
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
                details = opinion_details(out[i].details, accepted, by_domain[domain].by)
                out[i] = out[i].model_copy(update={"details": details})
    return out
