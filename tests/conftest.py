"""Suite-wide rules: a test that needs something missing fails loudly or is marked and counted.

- `gpu` tests are reported as skipped (with the reason, counted in the summary) when no CUDA device
  is present; everything else they need must be there.
- Selecting the `vllm` tests (`-m vllm`, as `make test-vllm` does) in an environment where vLLM does
  not import is an error, not a silent skip.
"""

from __future__ import annotations

import importlib.util

import pytest


def _selects_vllm(markexpr: str) -> bool:
    return "vllm" in markexpr and "not vllm" not in markexpr


def pytest_configure(config: pytest.Config) -> None:
    if _selects_vllm(config.option.markexpr or "") and importlib.util.find_spec("vllm") is None:
        raise pytest.UsageError("vllm tests selected but vllm is not importable here: run them in .venv-vllm "
                                "(make test-vllm)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    for item in gpu_items:
        item.add_marker(pytest.mark.skip(reason="gpu test: no CUDA device on this machine"))
