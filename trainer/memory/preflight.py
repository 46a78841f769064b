"""The memory check of `scalerl train` before any weight loads, and the plan `--dry-run` prints.

Every function takes `PlanInputs` (`TrainConfig.plan_inputs()`). `model_shape(model)` finds the model's
`config.json` without loading weights: a folder holding it (the folder may hold nothing else), an alias
(`smollm2-135m-instruct` → `datasets/model_shapes/smollm2-135m`), or a hub id already in the local
Hugging Face cache. `preflight(inputs)` builds the plan
(`scalerl.trainer.memory.plan.build_plan`) for `engine.device_memory_gib` or the detected CUDA memory and raises
`ConfigError` (exit 2 in `scalerl train`) naming the largest term and what shrinks it.

Guaranteed: no weights are read and nothing is allocated on a device (CUDA is only asked for its
total memory). Not guaranteed: a plan for the built-in tiny model, a `.gguf` file or a `model_type`
the plan does not know (those return None with the reason in `skipped_reason`; the run goes on).
"""

from __future__ import annotations

from pathlib import Path

from scalerl.env.contracts.config_loader import ConfigError
from scalerl.env.contracts.paths import DATASETS
from scalerl.trainer.engines.engine_config import EngineConfig
from scalerl.trainer.memory.lora import lora_notes
from scalerl.trainer.memory.lora import plan_args as lora_plan_args
from scalerl.trainer.memory.plan import GIB, MemoryPlan, PlanDoesNotFit, build_plan, check_fits, render
from scalerl.trainer.memory.plan_inputs import PlanInputs
from scalerl.trainer.memory.shapes import ModelShape

SHAPE_ALIASES = {"smollm2-135m-instruct": "smollm2-135m"}


def shapes_dir() -> Path:
    """`datasets/model_shapes/`: config.json files of the shapes the plan is tested on."""
    return DATASETS / "model_shapes"


def config_json(model: str | None) -> Path | str:
    """The model's config.json path, or a string saying why there is none."""
    if model is None:
        return "the built-in tiny model has no config.json"
    if model in SHAPE_ALIASES:
        return shapes_dir() / SHAPE_ALIASES[model] / "config.json"
    path = Path(model)
    if path.is_dir():
        return path / "config.json" if (path / "config.json").is_file() else f"{model}: no config.json"
    if model.endswith(".gguf"):
        return f"{model}: a .gguf file (its shape is read when it is converted)"
    try:
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(model, "config.json")
    except Exception as exc:  # an id that is not a repo id
        return f"{model}: {exc}"
    return Path(hit) if isinstance(hit, str) else f"{model}: config.json not in the local Hugging Face cache"


def model_shape(model: str | None) -> ModelShape | str:
    """The shape of `model` (the `model` setting), or the reason there is none."""
    found = config_json(model)
    if isinstance(found, str):
        return found
    try:
        return ModelShape.from_folder(found)
    except (ValueError, KeyError) as exc:
        return f"{found}: {exc}"


UNITS = {"gib": 1.0, "gb": 1e9 / GIB, "mib": 1 / 1024, "mb": 1e6 / GIB, "tib": 1024.0, "tb": 1e12 / GIB}


def parse_memory_gib(text: str) -> float:
    """`80GiB`, `80 GB`, `24gib`, `512MiB` or a bare number (GiB) → GiB, for a `--device-memory` flag
    (→ `engine.device_memory_gib`); ConfigError on anything else."""
    t = text.strip().lower().replace(" ", "")
    unit = next((u for u in sorted(UNITS, key=len, reverse=True) if t.endswith(u)), "")
    try:
        value = float(t[: len(t) - len(unit)] if unit else t)
    except ValueError:
        raise ConfigError(f"--device-memory {text!r}: expected e.g. 80GiB, 24GB or 512MiB") from None
    if value <= 0:
        raise ConfigError(f"--device-memory {text!r}: must be positive")
    return value * UNITS.get(unit, 1.0)


def device_memory(engine: EngineConfig) -> int | None:
    """Bytes per GPU: `engine.device_memory_gib`, else CUDA's total memory of device 0, else None (CPU)."""
    if engine.device_memory_gib is not None:
        return int(engine.device_memory_gib * GIB)
    if engine.device == "cpu":
        return None
    import torch

    if torch.cuda.is_available():
        return int(torch.cuda.get_device_properties(0).total_memory)
    return None


def plan_for(inputs: PlanInputs) -> tuple[MemoryPlan | None, str]:
    """(plan, note): the plan of `inputs` for its device memory, or (None, why there is none)."""
    shape = model_shape(inputs.model)
    if isinstance(shape, str):
        return None, f"memory plan skipped: {shape}"
    cap = device_memory(inputs.engine)
    plan = build_plan(shape, inputs, device_memory=cap, **lora_plan_args(shape, inputs))  # LoRA: adapters only
    plan.notes += lora_notes(shape, inputs)  # vLLM's LoRA slot, inside its share
    note = "" if cap is not None else "device memory unknown (set engine.device_memory_gib): nothing checked"
    return plan, note


def preflight(inputs: PlanInputs) -> MemoryPlan | None:
    """Raise `ConfigError` when the plan of `inputs` does not fit; the plan (None when there is none)."""
    plan, _ = plan_for(inputs)
    if plan is not None:
        try:
            check_fits(plan)
        except PlanDoesNotFit as exc:
            raise ConfigError(str(exc)) from None
    return plan


def plan_report(inputs: PlanInputs) -> str:
    """The text `scalerl train --dry-run` prints: the plan per device, or why there is none."""
    plan, note = plan_for(inputs)
    lines = ["memory plan (per device, before any weight loads):"]
    if plan is not None:
        lines.append(render(plan))
        try:
            check_fits(plan)
        except PlanDoesNotFit as exc:
            lines.append(str(exc))
    if note:
        lines.append(note)
    return "\n".join(lines)
