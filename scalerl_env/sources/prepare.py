"""Prepare a source into problem records, hold out a validation split, and self-check gold answers.

`prepare` reads raw rows (loading.py), makes each a record (rows.py), drops repeated prompt ids (first
kept) and splits off a held-out set. A row that fails is reported as a `RowError` (source, origin,
row number, reason) and the run goes on. `check_records` scores every record's gold completion
(`metadata["solution"]`) with `verifiers.verify_batch` and reports those not `correct`.

Held-out split, the one splitter of the project (`data prepare`, the verl import, and the trainer's
split of training files and of generated problems all call `split_holdout`): the `n` records with the
smallest sha256(f"{seed}:{prompt_id}") — independent of row order, so a problem's side of the split
does not depend on how the file was shuffled (the paper holds out 1,000 prompts for validation).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalerl.env.contracts.records import Limits, ProblemRecord, VerifyItem

from .loading import DataLoadError, RowError, iter_rows
from .manifest import SourceManifest
from .rows import RowFormatError, row_record

logger = logging.getLogger(__name__)


@dataclass
class PrepareResult:
    records: list[ProblemRecord] = field(default_factory=list)
    heldout: list[ProblemRecord] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)
    rows_read: int = 0
    duplicates: int = 0


def prepare(
    manifest: SourceManifest,
    *,
    files: list[Path] | dict[str | None, list[Path]] | None = None,
    configs: list[str | None] | None = None,
    split: str | None = None,
    limit: int | None = None,
    holdout: int = 0,
    holdout_seed: int = 0,
    cache_dir: str | None = None,
) -> PrepareResult:
    """Rows of `manifest`'s source as records: local `files` (a list, read as `configs[0]`, or a dict
    config → files), else the hub's `configs` (default: all in the manifest) at `split`."""
    result = PrepareResult()
    seen: set[str] = set()
    split = split or manifest.hub.splits[0]
    for config, item in _plan_rows(manifest, files, configs, split, cache_dir):
        if limit is not None and result.rows_read >= limit:
            break
        result.rows_read += 1
        if isinstance(item, RowError):
            result.errors.append(item)
            continue
        origin, number, row = item
        extra = {"split": split, **({"config": config} if config else {})}
        try:
            record = row_record(manifest, row, extra)
        except RowFormatError as exc:
            result.errors.append(RowError(manifest.name, origin, number, str(exc)))
            continue
        except Exception as exc:  # hostile rows: any failure is reported, never fatal
            result.errors.append(RowError(manifest.name, origin, number, f"{type(exc).__name__}: {exc}"))
            continue
        _add_first(result, seen, record)
    result.records, result.heldout = split_holdout(result.records, holdout, seed=holdout_seed)
    for error in result.errors:
        logger.warning("skipped %s", error)
    return result


def _plan_rows(manifest: SourceManifest, files, configs, split: str, cache_dir: str | None):
    """(config, row or RowError) over the inputs. From the hub, a config that lacks `split` (DeepCoder's
    codeforces has only `test`) is reported as a RowError (row 0) and skipped, unless every config fails."""
    if isinstance(files, dict):
        plan = list(files.items())
    elif files:
        plan = [((configs or [None])[0], list(files))]
    else:
        plan = [(config, None) for config in configs or manifest.hub.configs]
    failures = []
    for config, paths in plan:
        rows = iter_rows(manifest.name, files=paths, hub_path=manifest.hub.path, config=config,
                         split=split, cache_dir=cache_dir)
        try:
            for item in rows:
                yield config, item
        except DataLoadError as exc:
            if paths is not None or len(plan) == 1:
                raise
            failures.append(exc)
            yield config, RowError(manifest.name, f"{manifest.hub.path}[{config}:{split}]", 0, str(exc))
    if plan and len(failures) == len(plan):
        raise DataLoadError(f"{manifest.name}: no config could be loaded ({failures[0]})")


def prepare_verl(files: list[Path], *, limit: int | None = None, holdout: int = 0, holdout_seed: int = 0
                 ) -> PrepareResult:
    """Records of verl parquet files (ours or foreign), first of each prompt id kept, split like `prepare`."""
    from .verl import read_records

    if not files:
        raise DataLoadError("verl: pass the parquet file(s) with --data-files")
    result, seen = PrepareResult(), set()
    for path in files:
        if not Path(path).is_file():
            raise DataLoadError(f"verl: no such file {path}")
        records, errors = read_records(path)
        result.errors += errors
        for record in records:
            if limit is not None and result.rows_read >= limit:
                break
            result.rows_read += 1
            _add_first(result, seen, record)
    result.records, result.heldout = split_holdout(result.records, holdout, seed=holdout_seed)
    return result


def _add_first(result: PrepareResult, seen: set[str], record: ProblemRecord) -> None:
    """Keep the first record of each prompt id; later ones only count as duplicates."""
    if record.prompt_id in seen:
        result.duplicates += 1
        return
    seen.add(record.prompt_id)
    result.records.append(record)


def holdout_count(total: int, fraction: float, max_prompts: int) -> int:
    """How many of `total` distinct prompts a fractional split holds out: at least one, at most `max_prompts`."""
    return min(max_prompts, max(1, round(fraction * total)))


def holdout_key(prompt_id: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{prompt_id}".encode()).hexdigest()


def split_holdout(records: list[ProblemRecord], n: int, *, seed: int = 0
                  ) -> tuple[list[ProblemRecord], list[ProblemRecord]]:
    """(train, held-out): the `n` records of lowest `holdout_key` are held out; order is kept."""
    if n <= 0:
        return list(records), []
    chosen = set(sorted(holdout_key(r.prompt_id, seed) for r in records)[:n])
    train = [r for r in records if holdout_key(r.prompt_id, seed) not in chosen]
    held = [r for r in records if holdout_key(r.prompt_id, seed) in chosen]
    return train, held


@dataclass
class CheckFailure:
    index: int
    prompt_id: str
    source: str
    status: str
    detail: str


@dataclass
class CheckReport:
    total: int
    checked: int
    failures: list[CheckFailure]

    @property
    def correct(self) -> int:
        return self.checked - len(self.failures)

    @property
    def unchecked(self) -> int:
        return self.total - self.checked


def gold_item(record: ProblemRecord, index: int, limits: Limits | None = None) -> VerifyItem | None:
    """The verify item scoring `record`'s gold completion, or None when it has none."""
    solution = record.metadata.get("solution")
    if not isinstance(solution, str) or not solution:
        return None
    return VerifyItem(id=str(index), domain=record.domain, completion=solution, answer=record.answer,
                      tests=record.tests, limits=limits if record.tests is not None else None)


def check_records(records: list[ProblemRecord], *, config: Any = None, limits: Limits | None = None,
                  batch_size: int = 256) -> CheckReport:
    """Score every gold completion; the report lists the records whose gold is not `correct`.

    `limits` applies to code items (default: the verifier's); a reference program slower than the
    limit is reported as `timeout`, which is also what a model's equally slow program would get.
    """
    from scalerl.verifiers import verify_batch

    items = [(i, item) for i, r in enumerate(records) if (item := gold_item(r, i, limits)) is not None]
    failures: list[CheckFailure] = []
    for start in range(0, len(items), batch_size):
        chunk = items[start:start + batch_size]
        for (index, _), verdict in zip(chunk, verify_batch([it for _, it in chunk], config=config)):
            if not verdict.correct:
                failures.append(CheckFailure(index, records[index].prompt_id, records[index].source,
                                             verdict.status.value, _detail(verdict.details)))
    return CheckReport(total=len(records), checked=len(items), failures=failures)


def _detail(details: dict[str, Any]) -> str:
    keys = ("extracted", "answer", "reason", "error", "stderr_tail", "message")
    found = {k: details[k] for k in keys if details.get(k) not in (None, "")}
    return "; ".join(f"{k}={str(v)[:200]}" for k, v in found.items())


def drop_failing(records: Iterable[ProblemRecord], report: CheckReport) -> list[ProblemRecord]:
    bad = {f.index for f in report.failures}
    return [r for i, r in enumerate(records) if i not in bad]
