"""Checkpoints: Hugging Face safetensors for the model, a separate file for the trainer state.

Layout of a checkpoint folder `<root>/<name>/`:
    config.json, model.safetensors (or shards + index)   `model.save_pretrained` — loadable by HF/vLLM
    trainer_state.pt     optimizer + scheduler state dicts, RNG states (torch CPU/CUDA, python, numpy),
                         step, policy_version (torch.save; loaded with weights_only=True)
    trainer_state.json   step, policy_version and `extra` for humans and tools
    adapter_model.safetensors   only for a LoRA trainer (`scalerl.trainer.core.lora`): its adapters; the HF files
                         then hold the merged policy, and a resume reloads the base from the run's
                         model source and the adapters from here
    sharded/             only when written by several trainer ranks: model and optimizer state in
                         torch.distributed.checkpoint format (then not in trainer_state.pt), which any
                         number of ranks, one included, reads (`scalerl.trainer.core.sharded_checkpoint`)

Atomicity: everything is written into `<root>/~<name>` and renamed to `<name>` at the end; a crash
leaves at most a `~name` folder (ignored and replaced next time), never a half checkpoint under its
real name. An existing `<name>` is replaced only after the new one is complete. `<root>/latest`
(written atomically) names the last completed checkpoint.
`prune_checkpoints` deletes older `<name>` folders after a save (`checkpoint.keep_last`), never the one
`latest` names.

Guarantee: `load_checkpoint` into a trainer built the same way restores model weights (bit-exact),
optimizer, scheduler, RNG, step and policy_version, so the next step is bit-identical on CPU.
Non-guarantee: resuming on a different device or torch version is not bit-identical.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file
from scalerl.env.contracts.config_loader import atomic_write_text
from scalerl.trainer.core.update import PolicyTrainer
from torch import nn

STATE_PT = "trainer_state.pt"
STATE_JSON = "trainer_state.json"
STEP_PREFIX = "step_"  # a run's checkpoint folders: step_NNNNNN (`step_folder`)


def _rng_state() -> dict[str, Any]:
    np_state = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
        "numpy": [np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), *np_state[2:]],
    }


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    version, *rest = state["python"]
    random.setstate((version, tuple(rest[0]), rest[1]))
    name, keys, *tail = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), *tail))


def save_checkpoint(
    path: str | Path, model: nn.Module, trainer: PolicyTrainer | None = None, *, extra: dict | None = None,
    files: Mapping[str, Path] | None = None, sharded: Callable[[Path], None] | None = None,
) -> Path:
    """Write the checkpoint folder `path` atomically (see the module docstring); `trainer=None` saves
    the model only. `files` (name → source path) are moved into the folder before it is renamed into
    place, so a checkpoint that `latest` names always holds them. `path.parent/latest` then names it.
    `sharded(tmp_folder)`, when given, writes the model and optimizer state of several trainer ranks
    (`scalerl.trainer.core.sharded_checkpoint`); `trainer_state.pt` then holds no optimizer state."""
    final = Path(path)
    root = final.parent
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f"~{final.name}"
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp)
    summary: dict[str, Any] = {"extra": extra or {}}
    if trainer is not None:
        _save_adapters(trainer.model, tmp)
        torch.save(_trainer_state(trainer, with_optimizer=sharded is None), tmp / STATE_PT)
        summary.update(step=trainer.step_count, policy_version=trainer.policy_version)
    if sharded is not None:
        sharded(tmp)
    (tmp / STATE_JSON).write_text(json.dumps(summary, indent=2, default=str))
    for name, source in (files or {}).items():
        shutil.move(str(source), str(tmp / name))
    _fsync_dir(tmp)
    _replace_dir(tmp, final)
    atomic_write_text(root / "latest", final.name + "\n")
    return final


def _save_adapters(model: nn.Module, folder: Path) -> None:
    from scalerl.trainer.core.lora import ADAPTER_FILE, adapter_state_dict, has_lora

    if has_lora(model):
        from safetensors.torch import save_file

        save_file({k: v.contiguous().cpu() for k, v in adapter_state_dict(model).items()}, str(folder / ADAPTER_FILE))


def _load_adapters(model: nn.Module, folder: Path) -> None:
    """A LoRA trainer's adapters from `folder`; a LoRA trainer without them, or the reverse, is an error."""
    from scalerl.trainer.core.lora import ADAPTER_FILE, has_lora, load_adapters

    saved = (folder / ADAPTER_FILE).is_file()
    if has_lora(model) != saved:
        raise ValueError(f"{folder}: checkpoint {'holds' if saved else 'has no'} LoRA adapters but the trainer "
                         f"{'does not use' if saved else 'uses'} LoRA (lora.enabled must match the run's)")
    if saved:
        load_adapters(model, load_file(str(folder / ADAPTER_FILE), device=str(next(model.parameters()).device)))


def _trainer_state(trainer: PolicyTrainer, *, with_optimizer: bool = True) -> dict[str, Any]:
    return {
        **({"optimizer": trainer.optimizer.state_dict()} if with_optimizer else {}),
        "scheduler": trainer.scheduler.state_dict(),
        "rng": _rng_state(),
        "step": trainer.step_count,
        "policy_version": trainer.policy_version,
    }


def _replace_dir(tmp: Path, final: Path) -> None:
    """Rename `tmp` to `final`; an existing `final` is moved aside first and removed after."""
    if not final.exists():
        tmp.rename(final)
        return
    old = final.parent / f"~{final.name}.old"
    if old.exists():
        shutil.rmtree(old)
    final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old)


def _fsync_dir(path: Path) -> None:
    for f in path.rglob("*"):  # sub-folders too: the sharded state of several trainer ranks
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())


def latest_checkpoint(root: str | Path) -> Path | None:
    """The folder named by `<root>/latest`, or None when there is none yet."""
    pointer = Path(root) / "latest"
    if not pointer.exists():
        return None
    path = Path(root) / pointer.read_text().strip()
    return path if path.is_dir() else None


def step_folder(root: str | Path, step: int) -> Path:
    """The checkpoint folder of optimizer step `step` under `root` (`step_NNNNNN`)."""
    return Path(root) / f"{STEP_PREFIX}{step:06d}"


def prune_checkpoints(root: str | Path, keep_last: int) -> list[Path]:
    """Delete all but the newest `keep_last` step folders under `root` (by step number), never the one
    `latest` names nor a `~` staging folder. Returns the folders deleted, oldest first."""
    if keep_last < 1:
        raise ValueError(f"keep_last must be >= 1, got {keep_last}")
    steps = sorted((p for p in Path(root).glob(f"{STEP_PREFIX}*")
                    if p.is_dir() and p.name.removeprefix(STEP_PREFIX).isdigit()),
                   key=lambda p: int(p.name.removeprefix(STEP_PREFIX)))
    current = latest_checkpoint(root)
    doomed = [p for p in steps[:-keep_last] if current is None or p.name != current.name]
    for folder in doomed:
        shutil.rmtree(folder)
    return doomed


def load_model_weights(path: str | Path, model: nn.Module) -> None:
    """Load safetensors weights (single file or shards) into `model` in place; tied weights may be absent."""
    path = Path(path)
    files = sorted(path.glob("model*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no model*.safetensors in {path}")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(f)))
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = _tied_names(model)
    really_missing = [k for k in missing if k not in tied]
    if really_missing or unexpected:
        raise ValueError(
            f"checkpoint {path} does not match the model: missing {really_missing}, unexpected {unexpected}"
        )


def _tied_names(model: nn.Module) -> set[str]:
    """Names of parameters that share storage with an earlier-named parameter."""
    seen: dict[int, str] = {}
    tied = set()
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            tied.add(name)
        seen.setdefault(id(p), name)
    return tied


def load_checkpoint(
    path: str | Path, model: nn.Module, trainer: PolicyTrainer | None = None
) -> dict[str, Any]:
    """Load the weights into `model`; with `trainer`, also restore optimizer, scheduler, RNG, step and
    policy_version. Returns the JSON summary."""
    path = Path(path)
    if not (path / STATE_JSON).exists():
        raise FileNotFoundError(f"{path} is not a complete checkpoint (no {STATE_JSON})")
    load_model_weights(path, model)
    if trainer is None:
        return json.loads((path / STATE_JSON).read_text())
    if not (path / STATE_PT).exists():
        raise FileNotFoundError(f"{path} holds model weights only (no {STATE_PT}); cannot resume a trainer")
    _load_adapters(trainer.model, path)
    state = torch.load(path / STATE_PT, map_location="cpu", weights_only=True)
    if "optimizer" in state:
        trainer.optimizer.load_state_dict(state["optimizer"])
    else:  # written by several trainer ranks: sharded optimizer state, readable with any number of ranks
        from scalerl.trainer.core.sharded_checkpoint import load_sharded

        load_sharded(path, trainer)
    trainer.scheduler.load_state_dict(state["scheduler"])
    _set_rng_state(state["rng"])
    trainer.step_count = int(state["step"])
    trainer.policy_version = int(state["policy_version"])
    return json.loads((path / STATE_JSON).read_text())
