"""LoRA adapters on a Hugging Face causal LM, in place, through PEFT (`peft.inject_adapter_in_model`).

- `apply_lora(model, cfg)`: the modules named by `cfg.target_modules` become PEFT `lora.Linear` layers
  (the base weight under `<name>.base_layer.weight`, adapters `lora_A`/`lora_B`, B initialised to zero so
  the policy is unchanged); every other parameter is frozen. The model keeps its class, decoder and LM
  head, so `scalerl.trainer.core.fp32_head` and the update step run on it unchanged, and AdamW sees the adapters
  only (`build_optimizer` takes the parameters that require gradients).
- `merged_state_dict(model)`: the policy the adapters define, under the plain Hugging Face names
  (W + alpha/r · B A for each adapted layer, every other weight as is): what the torch engine (and vLLM
  with `lora.vllm_adapters=false`) and checkpoints' `model.safetensors` receive. Not modified in place.
- `adapter_state_dict(model)` / `load_adapters(model, state)`: the adapter tensors alone (checkpoints,
  and the push to vLLM under `lora_config.pushes_adapters`).
- `base_state_dict(model)`: the frozen base weights under the plain names (what vLLM's model folder holds
  when it serves the adapters through its own LoRA loading; views, no copy).
- `write_peft_adapter(folder, adapters, cfg)`: a PEFT adapter folder (`adapter_config.json` +
  `adapter_model.safetensors`, keys `base_model.model.<module>.lora_A.weight` as PEFT's `save_pretrained`
  writes them), the layout vLLM's `LoRARequest` loads; the safetensors file is replaced atomically.

Works for any model whose target layers are `nn.Linear` (the built-in tiny model is a
`LlamaForCausalLM`, so it gets adapters like SmolLM2 or Qwen2.5). Not guaranteed: several adapters at
once, adapters on embeddings or the LM head (refused by `LoraConfig`), FSDP2 sharding of an adapted
model (`trainer_ranks.count > 1` with LoRA is refused at start).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import torch
from scalerl.trainer.core.lora_config import LoraConfig
from torch import Tensor, nn

ADAPTER = "default"
ADAPTER_FILE = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
PEFT_PREFIX = "base_model.model."  # PeftModel wraps the base model twice; saved keys carry both names


def apply_lora(model: nn.Module, cfg: LoraConfig) -> nn.Module:
    """Inject adapters into `model` in place (see the module docstring); returns `model`."""
    from peft import LoraConfig as PeftLoraConfig
    from peft import inject_adapter_in_model

    peft_cfg = PeftLoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                              target_modules=list(cfg.target_modules), bias="none")
    try:
        inject_adapter_in_model(peft_cfg, model, adapter_name=ADAPTER)
    except ValueError as exc:  # PEFT: "Target modules {...} not found in the base model"
        raise ValueError(f"lora.target_modules {cfg.target_modules}: {exc}") from None
    if not has_lora(model):
        raise ValueError(f"lora.target_modules {cfg.target_modules} matched no linear layer of "
                         f"{type(model).__name__}")
    for name, p in model.named_parameters():
        p.requires_grad_(".lora_" in name)
    return model


def lora_layers(model: nn.Module) -> dict[str, nn.Module]:
    """Adapted layers by their plain module name."""
    from peft.tuners.lora import LoraLayer

    return {name: m for name, m in model.named_modules() if isinstance(m, LoraLayer)}


def has_lora(model: nn.Module) -> bool:
    """Whether `model` holds adapters (by parameter name: no PEFT import for a model without)."""
    return any(".lora_" in name for name, _ in model.named_parameters())


def adapter_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """The adapter tensors (`...lora_A.default.weight`, `...lora_B.default.weight`), detached."""
    return {k: v.detach() for k, v in model.state_dict().items() if ".lora_" in k}


def load_adapters(model: nn.Module, state: Mapping[str, Tensor]) -> None:
    """Copy `state` (from `adapter_state_dict`) into the adapters of `model`; names must match exactly."""
    own = adapter_state_dict(model)
    if set(own) != set(state):
        missing, extra = sorted(set(own) - set(state))[:3], sorted(set(state) - set(own))[:3]
        raise ValueError(f"adapters do not match the model's (lora section changed?): missing {missing}, "
                         f"unexpected {extra}")
    with torch.no_grad():
        for k, v in state.items():
            own[k].copy_(v)


@torch.no_grad()
def merged_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """The merged policy's weights under the plain Hugging Face names (see the module docstring)."""
    layers = lora_layers(model)
    out: dict[str, Tensor] = {}
    for key, value in model.state_dict().items():
        if ".lora_" in key:
            continue
        module, _, leaf = key.rpartition(".base_layer.")
        if module in layers and leaf == "weight":
            layer = layers[module]
            delta = layer.get_delta_weight(ADAPTER) if ADAPTER in layer.lora_A else 0
            out[f"{module}.weight"] = (value + delta).detach()
        else:
            out[key.replace(".base_layer.", ".")] = value.detach()
    return out


def count_adapter_params(model: nn.Module) -> int:
    return sum(v.numel() for v in adapter_state_dict(model).values())


def base_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """The base weights of an adapted model under the plain Hugging Face names (adapters left out)."""
    return {k.replace(".base_layer.", "."): v.detach() for k, v in model.state_dict().items() if ".lora_" not in k}


def peft_names(adapters: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """`adapter_state_dict` names -> the names PEFT's `save_pretrained` writes (no adapter name, prefixed)."""
    return {PEFT_PREFIX + k.replace(f".{ADAPTER}.", "."): v for k, v in adapters.items()}


def write_peft_adapter(folder: str | Path, adapters: Mapping[str, Tensor], cfg: LoraConfig) -> Path:
    """A PEFT adapter folder for `adapters` (see the module docstring); returns the folder."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": cfg.rank, "lora_alpha": cfg.alpha,
              "lora_dropout": cfg.dropout, "target_modules": list(cfg.target_modules), "bias": "none",
              "fan_in_fan_out": False, "use_rslora": False, "use_dora": False, "modules_to_save": None}
    (folder / ADAPTER_CONFIG).write_text(json.dumps(config, indent=1))
    tmp = folder / f"~{ADAPTER_FILE}"
    save_file({k: v.detach().cpu().contiguous() for k, v in peft_names(adapters).items()}, str(tmp))
    os.replace(tmp, folder / ADAPTER_FILE)  # a reader sees the old file or the new one, never half of one
    return folder
