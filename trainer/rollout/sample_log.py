"""`rollouts.jsonl`: a bounded sample of what the model wrote, per training step and per validation, and a
warning when a domain's samples are nearly all unreadable for several steps.

Each line: `kind` (train | validation), `step` (the step that trains on it; for validation the step
validated), `prompt_id` (joins the ledger's `attempts.prompt_id`), `domain`, `source` (the `data.sources`
entry's label, `scalerl.trainer.run.data_sources.source_labels`; null for a held-out file's problem), `sample_index`,
`completion` (cut to `rollout_log.max_chars`), `status`, `reward`, `truncated`, `finish_reason`,
`completion_tokens`, `policy_versions` ([first, last] version that produced its tokens), `details` (the
verdict's details, bounded by `bounded_details`: for code the sandbox's `stdout_head` / `stderr_tail` of
the first failing test, each test's outcome, passed/total; for math the extracted answer and the method).
Per step at most `rollout_log.samples_per_step` lines (the first sample of each group, then the second,
...), per validation at most `samples_per_validation` per domain. Every step record gets
`draws/<domain>/<source>`: how many of the step's groups came from each source (the mix as trained).

Format watch: when at least `warn_fraction` of a domain's samples are `no_answer` / `unparsable` for
`warn_after_steps` steps in a row, the log warns once (again after a good step), naming the likely cause:
the budget when most of those samples were truncated, else the format (prompt template / instruction).
Not guaranteed: lines past a checkpoint are dropped on resume like metrics.jsonl, so a crash between a
step and its checkpoint may leave a step's lines twice.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scalerl.env.contracts.records import ProblemRecord, Verdict
from scalerl.trainer.config.data import RolloutLogConfig

log = logging.getLogger(__name__)
FORMAT_FAILURES = ("no_answer", "unparsable")
FILE = "rollouts.jsonl"
DETAIL_ITEMS, DETAIL_KEYS, DETAIL_DEPTH = 16, 32, 4  # per list, per mapping, levels of nesting kept
DETAIL_BUDGET = 4  # the strings of one line's details share 4 x max_chars characters


def bounded_details(details: Mapping[str, Any], max_chars: int) -> dict[str, Any]:
    """A verdict's details made small and JSON-safe: each string cut to `max_chars` (its last ones under a key
    ending in `_tail`, such as the code verifier's `stderr_tail`, else its first), all string values together
    to `DETAIL_BUDGET * max_chars` characters in the details' order (later strings come out empty once the
    budget is spent); a list keeps its first `DETAIL_ITEMS` items, a mapping its first `DETAIL_KEYS` keys;
    deeper than `DETAIL_DEPTH` levels, not JSON, or a non-finite float, a value becomes its `str()`."""
    budget = [DETAIL_BUDGET * max_chars]

    def text(v: str, tail: bool) -> str:
        n = max(0, min(max_chars, budget[0]))
        out = (v[-n:] if n else "") if tail else v[:n]
        budget[0] -= len(out)
        return out

    def walk(v: Any, depth: int, tail: bool = False) -> Any:
        if v is None or isinstance(v, (bool, int)) or (isinstance(v, float) and math.isfinite(v)):
            return v
        if isinstance(v, str):
            return text(v, tail)
        if depth > 0 and isinstance(v, Mapping):
            return {str(k)[:max_chars]: walk(x, depth - 1, str(k).endswith("_tail"))
                    for k, x in list(v.items())[:DETAIL_KEYS]}
        if depth > 0 and isinstance(v, (list, tuple)):
            return [walk(x, depth - 1) for x in v[:DETAIL_ITEMS]]
        return text(str(v), tail)

    return walk(dict(details), DETAIL_DEPTH)


class RolloutLog:
    def __init__(self, out: Path, cfg: RolloutLogConfig, *, skipped: Mapping[str, int] | None = None,
                 resume_step: int | None = None, source_of: Mapping[str, str] | None = None) -> None:
        self.path, self.cfg = Path(out) / FILE, cfg
        self.source_of = dict(source_of or {})
        self.skipped = dict(skipped or {})
        self._streak: dict[str, int] = {}
        self._lock = threading.Lock()
        if resume_step is not None and self.path.is_file():
            keep = [line for line in self.path.read_text().splitlines(keepends=True)
                    if json.loads(line)["step"] <= resume_step]
            self.path.write_text("".join(keep))

    def _write(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            with self._lock, self.path.open("a", encoding="utf-8") as fh:
                fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))

    def _row(self, kind: str, step: int, problem: ProblemRecord, index: int, sample: Any, text: str,
             verdict: Verdict) -> dict[str, Any]:
        versions = list(sample.policy_versions) or [None]
        return {"kind": kind, "step": step, "prompt_id": problem.prompt_id, "domain": problem.domain,
                "source": self.source_of.get(problem.prompt_id), "sample_index": index,
                "completion": text[:self.cfg.max_chars], "status": verdict.status.value,
                "reward": verdict.reward, "truncated": bool(sample.truncated), "finish_reason": sample.finish_reason,
                "completion_tokens": len(sample.token_ids), "policy_versions": [versions[0], versions[-1]],
                "details": bounded_details(verdict.details, self.cfg.max_chars)}

    def observe_step(self, step: int, groups: Sequence[Any]) -> dict[str, float]:
        """Write this step's sample and update the format watch; returns metrics for the step record."""
        rows: list[dict[str, Any]] = []
        depth = max((len(g.samples) for g in groups), default=0)
        for i in range(depth):  # sample i of every group, then i + 1: many prompts before many samples
            for g in groups:
                if len(rows) < self.cfg.samples_per_step and i < len(g.samples):
                    rows.append(self._row("train", step, g.problem, i, g.samples[i], g.completions[i], g.verdicts[i]))
        self._write(rows)
        metrics: dict[str, float] = {f"data/skipped_long_prompts/{d}": float(n) for d, n in self.skipped.items()}
        for g in groups:
            key = f"draws/{g.domain}/{self.source_of.get(g.problem.prompt_id)}"
            metrics[key] = metrics.get(key, 0.0) + 1.0
        for domain in sorted({g.domain for g in groups}):
            pairs = [(s, v) for g in groups if g.domain == domain for s, v in zip(g.samples, g.verdicts)]
            metrics[f"format_failure_rate/{domain}"] = self._watch(step, domain, pairs)
        return metrics

    def _watch(self, step: int, domain: str, pairs: list[tuple[Any, Verdict]]) -> float:
        bad = [s for s, v in pairs if v.status.value in FORMAT_FAILURES]
        rate = len(bad) / max(1, len(pairs))
        self._streak[domain] = self._streak.get(domain, 0) + 1 if rate >= self.cfg.warn_fraction else 0
        if self._streak[domain] == self.cfg.warn_after_steps:
            truncated = sum(bool(s.truncated) or s.finish_reason == "length" for s in bad) / max(1, len(bad))
            cause = (f"the budget: {truncated:.0%} of them hit the token limit (raise length.* budgets and "
                     f"engine.max_seq_len)" if truncated >= 0.5 else
                     "the format: the model does not answer as the verifier reads it (check prompts.* and the "
                     "instruction in the data, e.g. \\boxed{} for math, one ```python block for code)")
            log.warning("%s: %.0f%% of samples were no_answer/unparsable for %d steps (step %d); likely cause: %s. "
                        "See %s", domain, 100 * rate, self._streak[domain], step, cause, self.path)
        return rate

    def validation_recorder(self, step: int):
        """A callback for `scalerl.trainer.run.validation.evaluate`: keeps the first samples of each domain."""
        counts: dict[str, int] = {}

        def record(problem: ProblemRecord, samples: Sequence[Any], texts: Sequence[str],
                   verdicts: Sequence[Verdict]) -> None:
            room = self.cfg.samples_per_validation - counts.get(problem.domain, 0)
            rows = [self._row("validation", step, problem, i, s, t, v)
                    for i, (s, t, v) in enumerate(zip(samples, texts, verdicts)) if i < room]
            counts[problem.domain] = counts.get(problem.domain, 0) + len(rows)
            self._write(rows)

        return record
