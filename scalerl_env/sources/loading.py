"""Raw rows of a source, through Hugging Face `datasets`: local files always, hub names when online.

`iter_rows` yields `(row_number, row_dict)` pairs and `RowError`s, never raises on a bad row: a row
is reported with its source, origin (file or hub split) and 1-based row number, and the run goes on.
A JSONL file that `datasets` refuses as a whole (a truncated line, a column whose type changes
between rows) is read again line by line, so its good rows survive and each bad line is reported
with its line number.

Non-guarantees: hub loading needs network access or a warm Hugging Face cache; nothing here
downloads in tests.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}


@dataclass(frozen=True)
class RowError:
    """A row that could not become a problem record: where it is and why."""

    source: str
    origin: str
    row: int
    message: str

    def __str__(self) -> str:
        return f"{self.source} {self.origin} row {self.row}: {self.message}"


class DataLoadError(RuntimeError):
    """A whole input could not be read (missing file, unknown format, hub unreachable)."""


def iter_rows(
    source: str,
    *,
    files: list[Path] | None = None,
    hub_path: str | None = None,
    config: str | None = None,
    split: str = "train",
    cache_dir: str | None = None,
) -> Iterator[tuple[str, int, dict[str, Any]] | RowError]:
    """Rows of local `files` (in order), else of the hub dataset `hub_path` (config, split)."""
    if files:
        for path in files:
            yield from _file_rows(source, Path(path), cache_dir)
        return
    if not hub_path:
        raise DataLoadError(f"{source}: no files given and no hub path")
    origin = f"{hub_path}[{config or 'default'}:{split}]"
    try:
        import datasets

        dataset = datasets.load_dataset(hub_path, name=config, split=split, cache_dir=cache_dir)
    except Exception as exc:  # network, auth, missing config: one clear message
        raise DataLoadError(f"{source}: cannot load {origin} from the hub ({exc}); "
                            "pass local files with --data-files") from exc
    for index, row in enumerate(dataset):
        yield origin, index + 1, row


def _file_rows(source: str, path: Path, cache_dir: str | None):
    if not path.is_file():
        raise DataLoadError(f"{source}: no such file {path}")
    builder = BUILDERS.get(path.suffix.lower())
    if builder is None:
        raise DataLoadError(f"{source}: {path} has unknown format; expected one of {sorted(BUILDERS)}")
    import datasets

    try:
        dataset = datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=cache_dir)
    except Exception as exc:
        if path.suffix.lower() != ".jsonl":
            raise DataLoadError(f"{source}: cannot read {path} ({exc})") from exc
        logger.warning("%s: datasets could not read %s as a whole (%s); reading it line by line",
                       source, path, exc.__class__.__name__)
        yield from _jsonl_lines(source, path)
        return
    for index, row in enumerate(dataset):
        yield str(path), index + 1, row


def _jsonl_lines(source: str, path: Path):
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                yield RowError(source, str(path), number, f"invalid JSON ({exc.msg} at column {exc.colno})")
                continue
            if not isinstance(row, dict):
                yield RowError(source, str(path), number, f"expected a JSON object, got {type(row).__name__}")
                continue
            yield str(path), number, row
