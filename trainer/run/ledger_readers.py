"""What a training run offers readers of its ledger while it holds the DuckDB file: atomic Parquet snapshots.

The trainer owns `ledger.duckdb` (DuckDB's lock keeps every other process out, read-only opens included), so
after steps it writes a snapshot of the ledger (`scalerl.curriculum.ledger.snapshot`) into
`RUN/ledger_snapshots/` and announces it in `RUN/ledger_readers.json`; `scalerl-env ledger query --run RUN`
reads the snapshot while the run trains and the file itself once the run has closed it.
Guarantees: the first snapshot is written before the note, both before the first step; a failed snapshot is
logged and never stops training. The spacing bounds the cost: the next snapshot waits at least
`MIN_EVERY_S` and at least `COST_FACTOR` times the last one's own duration, so snapshots take at most about
1/`COST_FACTOR` of the run's wall time however large the ledger grows. Not guaranteed: a snapshot after
every step, or one holding the latest step's rows (docs/ledger.md, "SQL while a run trains").
"""

from __future__ import annotations

import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from scalerl.curriculum.ledger.snapshot_read import ReadersNote, write_note

log = logging.getLogger(__name__)
MIN_EVERY_S = 2.0
COST_FACTOR = 20.0
KEEP = 2


class LedgerReaders:
    """Snapshots of `ledger` (a `Ledger` or its Ray actor proxy) for readers of the run folder `out`."""

    def __init__(self, ledger: Any, out: Path, ledger_name: str) -> None:
        self.ledger, self.out = ledger, out
        self.note = ReadersNote(ledger=ledger_name, min_every_s=MIN_EVERY_S, pid=os.getpid(),
                                host=socket.gethostname(), live=True)
        self._next_at = 0.0
        self.last_cost_s = 0.0
        self.after_step()
        write_note(out, self.note)

    def after_step(self) -> None:
        """Write a snapshot when the spacing since the last one has passed; a failure is logged, never raised."""
        now = time.monotonic()
        if now < self._next_at:
            return
        try:
            self.ledger.snapshot(self.out / self.note.snapshots, keep=KEEP)
        except Exception:  # a reader's convenience must never stop training; the next step retries
            log.exception("ledger snapshot failed")
        self.last_cost_s = time.monotonic() - now
        self._next_at = now + max(MIN_EVERY_S, COST_FACTOR * self.last_cost_s)

    def close(self) -> None:
        """Announce that the ledger file is free (call after the ledger is closed)."""
        write_note(self.out, self.note.model_copy(update={"live": False}))
