"""Device and dtype names of the config → torch objects; fails fast on a device that is not there."""

from __future__ import annotations

import torch
from scalerl.env.contracts.config_loader import ConfigError


def resolve_device(name: str) -> str:
    """`auto` → cuda when available, else cpu; a cuda device without CUDA is a ConfigError."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"engine.device={name} but CUDA is not available")
    return name


def torch_dtype(name: str) -> torch.dtype:
    """`float32` / `bfloat16` / `float16` → the torch dtype."""
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]
