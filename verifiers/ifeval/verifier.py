"""The instruction-following (`if`) domain's verifier for the batch API: IFEval-style constraints.

Per item: the response is the completion after the last `response_after` marker (a reasoning model's
`</think>`), read into the reference's constraints (`scalerl.verifiers.ifeval.reference`), each checked with
`scalerl.verifiers.ifeval.constraints` in both of IFEval's modes. The configured `mode` decides the verdict.

Reward (decided here): `reward: all` (the default) is IFEval's prompt-level measure: `correct` when
every constraint is followed, else `wrong`, rewarded by the reward table like every other domain.
With one constraint per prompt, as in Tülu 3's RLVR data, this is the same as a per-constraint reward.
`reward: fraction` keeps the status but rewards the share of constraints followed, between the table's
`wrong` and `correct` rewards (IFEval's instruction-level measure, a denser signal for multi-constraint
prompts).

Details: `mode`, `constraints` (ids), `failed` (ids not followed in `mode`), `followed` / `total`, and
`strict` / `loose` (prompt-level, both modes, so one pass gives IFEval's two accuracies).
Statuses: an empty response is `no_answer`; a completion over `max_completion_chars` is `unparsable`;
a constraint that cannot be checked here (the language check without langdetect), or a reference that
does not parse on an item built without validation, is `error`.

Guarantees: runs in the calling thread (no worker processes: every check is pure Python, bounded by
`max_completion_chars`; the sentence and word counts use nltk's punkt, at most ~2.4 s on 200,000
characters in loose mode: `scalerl.verifiers.ifeval.tokens`);
`submit` returns the collector at once and the work is done when it is called, so the pool's other
domains are already running; model text never raises. Within one batch, items with the same response
and the same reference are checked once; the others get a copy with `details["deduplicated"] = True`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from scalerl.env.contracts.records import RewardTable, Status, Verdict, VerifyItem
from scalerl.verifiers.ifeval.constraints import ConstraintUnavailable, followed
from scalerl.verifiers.ifeval.reference import parse_reference
from scalerl.verifiers.second_opinion import SecondJudge
from scalerl.verifiers.verifier_config import IfConfig


class IfBatchVerifier:
    """The `if` `DomainVerifier` (scalerl.env.contracts.domains)."""

    def __init__(self, config: IfConfig, rewards: RewardTable):
        self.config, self.rewards = config, rewards

    def submit(self, items: Sequence[VerifyItem]) -> Callable[[], list[Verdict]]:
        items = list(items)
        return lambda: self._score_batch(items)

    def _score_batch(self, items: list[VerifyItem]) -> list[Verdict]:
        """`score` per item, once per distinct (response, reference) (module docstring)."""
        cfg, memo, out = self.config, {}, []
        for item in items:
            if len(item.completion) > cfg.max_completion_chars:  # unparsable at once: nothing to share
                out.append(self.score(item.completion, item.answer or ""))
                continue
            key = (response_text(item.completion, cfg.response_after), item.answer or "")
            verdict = memo.get(key)
            if verdict is None:
                out.append(memo.setdefault(key, self.score(item.completion, item.answer or "")))
            else:
                out.append(verdict.model_copy(update={"details": {**verdict.details, "deduplicated": True}}))
        return out

    def second_judge(self) -> SecondJudge:
        """IFEval's loose mode re-checks `wrong` verdicts: it is in every verdict already (`details.loose`)."""
        return SecondJudge(frozenset({Status.wrong}), "ifeval_loose", loose_opinions)

    def ready(self) -> bool:
        return True

    def info(self) -> dict[str, Any]:
        return {}  # no worker processes, nothing killed

    def close(self) -> None:
        pass

    def score(self, completion: str, reference: str) -> Verdict:
        """The verdict of one completion against one reference (module docstring)."""
        start = time.perf_counter()
        cfg = self.config
        if len(completion) > cfg.max_completion_chars:
            return self._verdict(Status.unparsable, {"reason": f"completion longer than max_completion_chars="
                                                     f"{cfg.max_completion_chars}"}, start)
        response = response_text(completion, cfg.response_after)
        try:
            constraints = parse_reference(reference)  # the item's validator has parsed it already: cached
        except ValueError as exc:  # an item built without validation: this item's error, not the batch's
            return self._verdict(Status.error, {"reason": f"reference: {exc}"}, start)
        names = [name for name, _ in constraints]
        if not response.strip():
            return self._verdict(Status.no_answer, {"constraints": names, "failed": names}, start)
        try:
            strict = [followed(n, response, kw, "strict") for n, kw in constraints]
            loose = [s or followed(n, response, kw, "loose") for s, (n, kw) in zip(strict, constraints)]
        except ConstraintUnavailable as exc:
            return self._verdict(Status.error, {"constraints": names, "reason": str(exc)}, start)
        chosen = strict if cfg.mode == "strict" else loose
        details = {"mode": cfg.mode, "constraints": names, "failed": [n for n, ok in zip(names, chosen) if not ok],
                   "followed": sum(chosen), "total": len(chosen), "strict": all(strict), "loose": all(loose)}
        status = Status.correct if all(chosen) else Status.wrong
        reward = None
        if cfg.reward == "fraction" and status is Status.wrong:
            low, high = self.rewards.reward(Status.wrong), self.rewards.reward(Status.correct)
            reward = low + (high - low) * sum(chosen) / len(chosen)
        return self._verdict(status, details, start, reward)

    def _verdict(self, status: Status, details: dict, start: float, reward: float | None = None) -> Verdict:
        return Verdict.model_construct(status=status, reward=self.rewards.reward(status) if reward is None else reward,
                                       details=details, elapsed_s=time.perf_counter() - start, id=None)


def loose_opinions(items: Sequence[VerifyItem], verdicts: Sequence[Verdict]) -> Callable[[], list[bool | None]]:
    """Whether IFEval's loose mode accepts each verdict's response (None where a verdict has no loose result)."""
    return lambda: [v.details["loose"] if isinstance(v.details.get("loose"), bool) else None for v in verdicts]


def response_text(completion: str, markers: Sequence[str]) -> str:
    """The completion after the last occurrence of any marker (all of it when none occurs)."""
    cut = max(((completion.rfind(m), m) for m in markers if m), default=(-1, ""))
    return completion[cut[0] + len(cut[1]):] if cut[0] >= 0 else completion
