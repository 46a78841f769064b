"""`rollouts.jsonl` pages for the dashboard: an index of the filter fields, grown as the file grows.

`RolloutIndex` keeps, per line, its byte offset and the fields the page filters on (kind, step, domain,
status, prompt_id); on each call it parses only the bytes appended since the last one, so a long run's
file is read once, and a page reads only its own (at most `MAX_LIMIT`) lines from disk. Guaranteed:
nothing is written; a partial last line is left for the next call. Not guaranteed: a file that shrank
or was rewritten (a resumed run drops lines past its checkpoint) is noticed by its size only: the
index is then rebuilt from the start.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, NamedTuple

from scalerl.env.dashboard import models as m

MAX_LIMIT = 200


class Entry(NamedTuple):
    offset: int
    kind: str
    step: int
    domain: str
    status: str
    prompt_id: str


class Filter(NamedTuple):
    domain: str | None = None
    status: str | None = None
    step: int | None = None
    prompt: str | None = None
    kind: str | None = None

    def match(self, e: Entry) -> bool:
        return ((self.domain is None or e.domain == self.domain) and (self.status is None or e.status == self.status)
                and (self.step is None or e.step == self.step) and (self.prompt is None or e.prompt_id == self.prompt)
                and (self.kind is None or e.kind == self.kind))


class RolloutIndex:
    """The index of one `rollouts.jsonl`. Thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._entries: list[Entry] = []
        self._end = 0  # bytes indexed (always at a line boundary)

    def _grow(self) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            self._entries, self._end = [], 0
            return
        if size < self._end:
            self._entries, self._end = [], 0
        if size == self._end:
            return
        with self.path.open("rb") as f:
            f.seek(self._end)
            pos = self._end
            for raw in f:
                if not raw.endswith(b"\n"):
                    break  # a line still being written
                entry = _entry(pos, raw)
                if entry is not None:
                    self._entries.append(entry)
                pos += len(raw)
        self._end = pos

    def page(self, flt: Filter, offset: int, limit: int) -> tuple[int, list[dict[str, Any]], list[str], list[str]]:
        """(matches, the page's raw lines, every domain, every status)."""
        with self._lock:
            self._grow()
            entries = self._entries
        hits = [e for e in entries if flt.match(e)]
        picked = hits[offset:offset + min(limit, MAX_LIMIT)]
        rows = []
        if picked:
            with self.path.open("rb") as f:
                for e in picked:
                    f.seek(e.offset)
                    rows.append(json.loads(f.readline()))
        return (len(hits), rows, sorted({e.domain for e in entries}), sorted({e.status for e in entries}))


def _entry(offset: int, raw: bytes) -> Entry | None:
    try:
        r = json.loads(raw)
        return Entry(offset, str(r.get("kind", "train")), int(r.get("step") or 0), str(r.get("domain")),
                     str(r.get("status")), str(r.get("prompt_id")))
    except (ValueError, TypeError, AttributeError):
        return None


def rollout(r: dict[str, Any], prompt: str | None = None) -> m.Rollout:
    """One line of rollouts.jsonl as the page's row (unknown keys dropped; `details` kept when present, the
    sandbox's output and the verdict's reason read from it)."""
    details = r.get("details") if isinstance(r.get("details"), dict) else None
    d = details or {}
    return m.Rollout(
        kind=str(r.get("kind", "train")), step=int(r.get("step") or 0), prompt_id=str(r.get("prompt_id")),
        domain=str(r.get("domain")), source=r.get("source"), sample_index=r.get("sample_index"),
        status=str(r.get("status")), reward=r.get("reward"), truncated=r.get("truncated"),
        finish_reason=r.get("finish_reason"), completion_tokens=r.get("completion_tokens"),
        completion=str(r.get("completion", "")), prompt=prompt, why=why(d), details=details,
        stdout=_text(d.get("stdout_head", d.get("stdout"))), stderr=_text(d.get("stderr_tail", d.get("stderr"))))


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def why(d: dict[str, Any]) -> str | None:
    """A verdict's reason in one line, from the details the code and math verifiers write."""
    parts = []
    tests = d.get("tests")
    if isinstance(tests, list):
        parts.append(f"{d.get('passed', '?')}/{d.get('total', len(tests))} tests passed")
        failed = next((t for t in tests if isinstance(t, dict) and not t.get("passed")), None)
        if failed is not None:
            parts.append(f"test {failed.get('test')}: {failed.get('outcome')}"
                         + (f" ({failed['error']})" if failed.get("error") else ""))
    if "extracted" in d:
        parts.append(f"extracted {d['extracted']!r}" if d["extracted"] else "nothing extracted")
    if d.get("method"):
        parts.append(f"method {d['method']}")
    for key in ("reason", "error"):
        if d.get(key):
            parts.append(str(d[key]))
    return "; ".join(parts)[:500] or None
