"""Suite-wide rules: a test that needs something missing fails loudly or is marked and counted.

- `gpu` tests are reported as skipped (with the reason, counted in the summary) when no CUDA device
  is present; everything else they need must be there.
- Selecting the `vllm` tests (`-m vllm`, as `make test-vllm` does) imports vLLM first: where it is
  missing or fails to import (a broken dependency), the run is a usage error naming the cause, never a
  suite of silent skips.
- Selecting the `rl` tests (`-m rl`) makes a real library that does not import an error
  (`tests/env/rl_support.py`'s `require`), as `make test-rl` does by setting `SCALERL_RL_TESTS=1`.
"""

from __future__ import annotations

import importlib
import os
import re

import pytest

# tests/env/rl_support.py reads it: "1" makes a missing real library an error, not a skip.
RL_STRICT_ENV = "SCALERL_RL_TESTS"


def selects(marker: str, markexpr: str) -> bool:
    """Whether the `-m` expression names `marker` other than negated (`vllm and not slow`, not `not vllm`)."""
    tokens = re.findall(r"\w+|[()]", markexpr)
    return any(token == marker and (i == 0 or tokens[i - 1] != "not") for i, token in enumerate(tokens))


def require_vllm() -> None:
    try:
        importlib.import_module("vllm")
    except Exception as exc:  # any failure: a missing module, a broken dependency, a wrong build
        raise pytest.UsageError(f"vllm tests selected but vllm does not import here ({type(exc).__name__}: {exc}); "
                                "run them in .venv-vllm (make test-vllm)") from exc


def pytest_configure(config: pytest.Config) -> None:
    markexpr = config.option.markexpr or ""
    if selects("vllm", markexpr):
        require_vllm()
    if selects("rl", markexpr):
        os.environ[RL_STRICT_ENV] = "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    for item in gpu_items:
        item.add_marker(pytest.mark.skip(reason="gpu test: no CUDA device on this machine"))
