"""The code domain's verifier for the batch API: `scalerl.verifiers.code.judge.CodeVerifier`, built on first use.

Guarantees: while the sandbox cannot start here (a missing layer the configured level requires), every
item is answered `error` with the reason, and the next batch tries again; a failure of the verifier on a
batch is an `error` verdict per item, never an exception; rewards come from this pool's table.
Scoring runs in `submit` (the sandbox slots are the parallelism), so its collector returns at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from scalerl.env.contracts.records import Limits, RewardTable, Status, Verdict, VerifyItem
from scalerl.verifiers.second_opinion import SecondJudge
from scalerl.verifiers.verifier_config import CodeConfig

logger = logging.getLogger(__name__)


class CodeBatchVerifier:
    """The code `DomainVerifier` (scalerl.env.contracts.domains)."""

    def __init__(self, config: CodeConfig, rewards: RewardTable):
        self.config, self.rewards = config, rewards
        self._verifier = None
        self._error: str | None = None
        self._closed = False
        self._lock = threading.Lock()

    def submit(self, items: Sequence[VerifyItem]) -> Callable[[], list[Verdict]]:
        verdicts = self._verify(list(items))
        return lambda: verdicts

    def _verify(self, items: list[VerifyItem]) -> list[Verdict]:
        rewards = self.rewards
        verifier = self._code_verifier()
        if verifier is None:
            return [Verdict.of(Status.error, rewards=rewards,
                               details={"reason": f"code verifier unavailable: {self._error}"})
                    for _ in items]
        try:
            # The reward table is this pool's config, whichever table the code verifier applied.
            return [v.model_copy(update={"reward": rewards.reward(v.status)}) for v in verifier.verify_many(items)]
        except Exception as exc:
            logger.exception("code verifier failed on a batch of %d items", len(items))
            return [Verdict.of(Status.error, rewards=rewards,
                               details={"reason": f"code verifier failed: {type(exc).__name__}: {exc}"})
                    for _ in items]

    def _code_verifier(self):
        with self._lock:
            if self._verifier is None and not self._closed:
                try:
                    from scalerl.verifiers.code.judge import CodeVerifier  # the sandbox loads on first code item

                    self._verifier, self._error = CodeVerifier(self.config), None
                except Exception as exc:  # not there yet, or its sandbox cannot start here
                    self._error = f"{type(exc).__name__}: {exc}"
            return self._verifier

    def second_judge(self) -> SecondJudge:
        """`timeout` verdicts run again with `second_opinion_time_factor` x the time limit; a sandbox `error`
        is no opinion."""
        return SecondJudge(frozenset({Status.timeout}), "code_longer_time_limit", self._longer_run)

    def _longer_run(self, items: list[VerifyItem], verdicts: list[Verdict]) -> Callable[[], list[bool | None]]:
        longer = [item.model_copy(update={"limits": longer_limits(item.limits, self.config)}) for item in items]
        # The sandbox runs when collected, while the math workers judge their share.
        return lambda: [None if v.status is Status.error else v.status is Status.correct for v in self._verify(longer)]

    def ready(self) -> bool:
        return not self._closed

    def info(self) -> dict[str, Any] | None:
        verifier = self._verifier
        if verifier is not None:
            try:
                return verifier.info() if hasattr(verifier, "info") else {"layers": verifier.layers()}
            except Exception as exc:  # info must never take the server down
                return {"error": f"{type(exc).__name__}: {exc}"}
        return {"error": self._error} if self._error else None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            verifier, self._verifier = self._verifier, None
        if verifier is not None:
            try:
                verifier.close()
            except Exception:
                logger.exception("closing the code verifier failed")


def longer_limits(limits: Limits | None, config: CodeConfig) -> Limits:
    """The second opinion's limits: `second_opinion_time_factor` x the time limit, within what an item may set."""
    limits = limits or Limits()
    most = next(m.le for m in Limits.model_fields["time_s"].metadata if getattr(m, "le", None) is not None)
    return limits.model_copy(update={"time_s": min(limits.time_s * config.second_opinion_time_factor, most)})
