"""Where shipped data lives. `reference_dir()` is the public reference material (MATH-500, GSM8K,
MBPP, HumanEval samples, CodeContests tests, the paper's fit parameters): `$SCALERL_REFERENCE` when
set, else the copy vendored in `datasets/reference/` (each folder keeps its README and licence)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATASETS = REPO / "datasets"


def reference_dir() -> Path:
    return Path(os.environ.get("SCALERL_REFERENCE") or DATASETS / "reference")
