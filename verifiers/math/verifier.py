"""The math domain's verifier for the batch API: extraction, the exact fast path, then sympy workers.

Per item, in the calling thread: extract the answer (`scalerl.verifiers.math.extract`); no answer -> `no_answer`, an
answer over `max_answer_chars` -> `unparsable`; then the exact fast path (`scalerl.verifiers.math.fast`,
memoised across batches); only what is left goes to the persistent workers (`scalerl.verifiers.math.workers`), unless
the bounded reply cache holds a sympy verdict for the same pair from an earlier batch (correct / wrong
/ unparsable only: timeouts and crashes are never cached); identical (reference answer, extracted
answer) pairs are sent once per batch (RL groups repeat answers), and so are identical (reference,
completion) pairs to the second opinion's plain math-verify. The second opinion rides the same dispatch:
a sampled item (`scalerl.verifiers.second_opinion.sampled`) has its plain run queued once its verdict is
known negative: after the loop for what this thread decided, from the pair's reply for sympy's verdicts,
so plain runs and sympy pairs share the workers with no round after the verdicts. An item that carries its `question`
has a `correct` verdict checked against the answer forms the question states (`scalerl.verifiers.math.question`,
per item, after the pair is decided: the caches stay keyed on the pair alone).

Guarantees: `submit` returns at once with the sympy work in flight; its collector returns one verdict
per item in order; model text never raises. The workers start when the verifier is built and warm in
the background.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from scalerl.env.contracts.records import RewardTable, Status, Verdict, VerifyItem
from scalerl.verifiers.math.extract import clean_answer, extract_answer
from scalerl.verifiers.math.fast import fast_verdict
from scalerl.verifiers.math.question import check_forms
from scalerl.verifiers.math.workers import MathWorkerPool
from scalerl.verifiers.second_opinion import NEGATIVE, SecondJudge, opinion_details, sampled
from scalerl.verifiers.verifier_config import MathConfig

REPLY_CACHE_SIZE = 1 << 16  # sympy verdicts kept per verifier, across batches (a few MB at most)


class MathBatchVerifier:
    """The math `DomainVerifier` (scalerl.env.contracts.domains)."""

    def __init__(self, config: MathConfig, rewards: RewardTable):
        self.config, self.rewards = config, rewards
        self._workers = MathWorkerPool(config)
        self._replies: OrderedDict[tuple[str, str], dict] = OrderedDict()
        self._replies_lock = threading.Lock()

    def submit(self, items: Sequence[VerifyItem]) -> Callable[[], list[Verdict]]:
        items = list(items)
        verdicts: list[Verdict | None] = [None] * len(items)
        opinions = _SecondOpinions(self, items)
        pending = self._start_math(items, range(len(items)), verdicts)
        opinions.queue_decided(verdicts, pending)

        def collect() -> list[Verdict]:
            self._finish_math(items, pending, verdicts)
            return opinions.attach(verdicts)  # type: ignore[arg-type]  # every slot is filled by now

        return collect

    def plain_math_verify(self, answer: str, completion: str) -> Future:
        """Plain math-verify on the whole completion (its last `max_completion_chars`), in a worker under the
        hard deadline: the second opinion's judge (`scalerl.verifiers.second_opinion`). Never cached."""
        return self._workers.submit(answer, completion[-self.config.max_completion_chars:], plain=True)

    def second_judge(self) -> SecondJudge:
        """Plain math-verify re-checks the negative verdicts, given with them (`_SecondOpinions`)."""
        return SECOND_JUDGE

    def ready(self) -> bool:
        return self._workers.ready()

    def info(self) -> dict[str, Any]:
        return self._workers.info()

    def close(self) -> None:
        self._workers.close()

    def _question(self, item: VerifyItem) -> str | None:
        return item.question if self.config.question_forms else None

    def _start_math(self, items: list[VerifyItem], indices: Sequence[int], verdicts: list) -> dict:
        """Decide what can be decided here; submit the rest once per distinct pair. Returns pending."""
        cfg, rewards = self.config, self.rewards
        pending: dict[tuple, tuple[Any, list[int], dict]] = {}
        extracted: dict[str, Any] = {}  # identical completions in one batch are extracted once
        golds: dict[str, str] = {}  # a prompt's reference, cleaned once per batch
        fast: dict[tuple, Verdict] = {}  # one fast-path verdict per (gold, answer, method, question) of a batch
        for i in indices:
            start = time.perf_counter()
            completion = items[i].completion
            found = extracted.get(completion)
            if found is None:
                found = extracted[completion] = extract_answer(
                    completion, max_completion_chars=cfg.max_completion_chars, max_answer_chars=cfg.max_answer_chars,
                    answer_format=cfg.answer_format)
            details: dict[str, Any] = {"extracted": found.answer or None, "method": found.method or None}
            if found.kind != "answer":
                status = Status.no_answer if found.kind == "no_answer" else Status.unparsable
                if found.kind == "too_long":
                    details["reason"] = f"answer longer than max_answer_chars={cfg.max_answer_chars}"
                verdicts[i] = _verdict(status, details, rewards, time.perf_counter() - start)
                continue
            raw = items[i].answer or ""
            gold = golds.get(raw)
            if gold is None:
                gold = golds[raw] = clean_answer(raw)
            fast_key = (gold, found.answer, found.method, self._question(items[i]))
            if fast_key in fast:  # the same object again: the batch API copies each verdict it returns
                verdicts[i] = fast[fast_key]
                continue
            decided = cached_fast_verdict(gold, found.answer) if cfg.fast_path else None
            if decided is not None:
                status = Status.correct if decided else Status.wrong
                verdict = _verdict(status, {**details, "path": "fast", "rule": "fast_path"},
                                   rewards, time.perf_counter() - start)
                verdicts[i] = fast[fast_key] = with_forms(verdict, fast_key[3], gold, found.answer, rewards)
                continue
            key = (gold, found.answer) if cfg.dedupe else (gold, found.answer, i)
            if key in pending:
                pending[key][1].append(i)
            else:
                pending[key] = (self._submit(gold, found.answer), [i], details)
        return pending

    def _submit(self, gold: str, pred: str) -> Future:
        """A worker's reply for the pair; from the bounded cache of earlier sympy verdicts when known."""
        key = (gold, pred)
        with self._replies_lock:
            reply = self._replies.get(key)
            if reply is not None:
                self._replies.move_to_end(key)
        if reply is not None:
            done: Future = Future()
            done.set_result({**reply, "cached": True})
            return done
        future = self._workers.submit(gold, pred)
        future.add_done_callback(lambda f: self._remember(key, f.result()))
        return future

    def _remember(self, key: tuple[str, str], reply: dict) -> None:
        # Only verdicts that depend on the pair alone; a timeout or a crash may not repeat.
        if reply.get("status") in ("correct", "wrong", "unparsable"):
            with self._replies_lock:
                self._replies[key] = reply
                while len(self._replies) > REPLY_CACHE_SIZE:
                    self._replies.popitem(last=False)

    def _finish_math(self, items: list[VerifyItem], pending: dict, verdicts: list) -> None:
        rewards = self.rewards
        for future, indices, details in pending.values():
            reply = future.result()
            status = Status(reply["status"])
            out = {**details, "path": "sympy"}
            for key in ("reason", "rule"):
                if reply.get(key):
                    out[key] = reply[key]
            if reply.get("cached"):
                out["cached"] = True
            verdict = _verdict(status, out, rewards, reply.get("elapsed_s", 0.0))
            gold, pred = clean_answer(items[indices[0]].answer or ""), details["extracted"]
            verdicts[indices[0]] = with_forms(verdict, self._question(items[indices[0]]), gold, pred, rewards)
            for i in indices[1:]:
                copy = verdict.model_copy(update={"details": {**out, "deduplicated": True}})
                verdicts[i] = with_forms(copy, self._question(items[i]), gold, pred, rewards)


SECOND_JUDGE = SecondJudge(NEGATIVE, "plain_math_verify")


class _SecondOpinions:
    """One batch's plain math-verify re-checks: one run per distinct (reference, completion) of the sampled
    items whose verdict is negative, queued as soon as that is known (a reply `error` is no opinion)."""

    def __init__(self, verifier: MathBatchVerifier, items: list[VerifyItem]):
        self._verifier, self._items = verifier, items
        self._fraction = verifier.config.second_opinion
        self._wanted: dict[int, bool] = {}
        self._once: dict[tuple[str, str], Future] = {}
        self._runs: dict[int, Future] = {}
        self._lock = threading.Lock()  # sympy replies queue runs from the pool's driver threads

    def wanted(self, i: int) -> bool:
        if i not in self._wanted:
            self._wanted[i] = sampled(self._items[i], self._fraction)
        return self._wanted[i]

    def queue(self, i: int) -> None:
        item = self._items[i]
        key = (item.answer or "", item.completion)
        with self._lock:
            if i not in self._runs:
                run = self._once.get(key) or self._once.setdefault(key, self._verifier.plain_math_verify(*key))
                self._runs[i] = run

    def queue_decided(self, verdicts: list[Verdict | None], pending: dict) -> None:
        """Queue the runs of the negatives decided here; each sympy pair queues its own on a negative reply."""
        if self._fraction <= 0:
            return
        for i, verdict in enumerate(verdicts):
            if verdict is not None and verdict.status in NEGATIVE and self.wanted(i):
                self.queue(i)
        for future, indices, _ in pending.values():
            wanted = [i for i in indices if self.wanted(i)]
            if wanted:
                future.add_done_callback(functools.partial(self._after_reply, wanted))

    def _after_reply(self, indices: list[int], future: Future) -> None:
        if future.result().get("status") in NEGATIVE:
            for i in indices:
                self.queue(i)

    def attach(self, verdicts: list[Verdict]) -> list[Verdict]:
        """`verdicts` with the opinions in the details of the sampled negative ones."""
        if self._fraction <= 0:
            return verdicts
        for i, verdict in enumerate(verdicts):
            if verdict.status in NEGATIVE and self.wanted(i):
                # queued already, or a correct value a required answer form rejected; a pair's reply callback may
                # also still be running in its driver thread (a future's waiters wake before its callbacks)
                self.queue(i)
        with self._lock:
            runs = sorted(self._runs.items())
        for i, run in runs:
            status = run.result().get("status")
            if status != "error" and verdicts[i].status in NEGATIVE:
                details = opinion_details(verdicts[i].details, status == "correct", SECOND_JUDGE.by)
                verdicts[i] = verdicts[i].model_copy(update={"details": details})
        return verdicts


def _verdict(status: Status, details: dict, rewards, elapsed_s: float) -> Verdict:
    """A Verdict built without re-validation: every field comes from this module, already typed."""
    return Verdict.model_construct(status=status, reward=rewards.reward(status), details=details,
                                   elapsed_s=elapsed_s, id=None)


def with_forms(verdict: Verdict, question: str | None, gold: str, pred: str, rewards: RewardTable) -> Verdict:
    """A `correct` verdict checked against the answer forms the question states (`scalerl.verifiers.math.question`):
    a required form the answer is not in makes it `wrong`, named by `rule = form_<name>`. Without a
    question, or for any other status, the verdict is returned as it is."""
    if not question or verdict.status is not Status.correct:
        return verdict
    outcome = check_forms(question, gold, pred)
    if outcome is None:
        return verdict
    details = dict(verdict.details)
    if outcome.checked:
        details["forms"] = list(outcome.checked)
    if outcome.skipped:
        details["forms_skipped"] = list(outcome.skipped)  # the reference is not in that form
    if outcome.rejected_by is None:
        return verdict.model_copy(update={"details": details})
    details.update(rule=f"form_{outcome.rejected_by}", reason=outcome.reason, value_rule=verdict.details.get("rule"))
    return _verdict(Status.wrong, details, rewards, verdict.elapsed_s)


@functools.lru_cache(maxsize=1 << 16)
def cached_fast_verdict(gold: str, pred: str) -> bool | None:
    """`fast_verdict`, memoised across batches (a prompt's gold meets the same answers step after step). An
    answer written exactly as the cleaned reference is correct without parsing either (sympy agrees on
    every MATH-500 reference against itself: tests/verifiers/test_verdict_memo.py)."""
    return True if gold == pred else fast_verdict(gold, pred)
