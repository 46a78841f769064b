"""The trainer-rank part of a checkpoint: model and optimizer state in torch.distributed.checkpoint
(DCP) format, readable with any number of ranks.

A checkpoint written by N > 1 ranks holds, besides the Hugging Face weights rank 0 writes
(`scalerl.trainer.core.checkpoint`), `sharded/`: every rank's shard of the model and of the AdamW state,
keyed by parameter name (`policy.<HF name>`), so DCP reshards on load to the reader's world size,
one rank included (no process group needed). Its `trainer_state.pt` then has no `optimizer` entry;
scheduler, RNG (rank 0's), step and policy version stay there.

A checkpoint written by one rank (the format `scalerl.trainer.core.checkpoint` always wrote) resumes on N
ranks through `load_full_optimizer`: rank 0 reads the full optimizer state, names its entries, and
`set_optimizer_state_dict(..., broadcast_from_rank0=True)` hands each rank its shard.

Collective: `save_sharded`, `load_sharded` (with N > 1) and `load_full_optimizer` must be called by
every rank. Not guaranteed: bit-identical resume across different numbers of ranks (the float
summation order of the gradient reduction changes; parameters agree to float tolerance).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from scalerl.trainer.core.update import PolicyTrainer

SHARDED = "sharded"


def has_sharded(folder: str | Path) -> bool:
    return (Path(folder) / SHARDED).is_dir()


def save_sharded(folder: str | Path, trainer: PolicyTrainer) -> None:
    """This rank's shards of model and optimizer into `folder/sharded` (collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(trainer.logprob_model, trainer.optimizer)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(Path(folder) / SHARDED))


def load_sharded(folder: str | Path, trainer: PolicyTrainer) -> None:
    """Model and optimizer from `folder/sharded`, resharded to this world size (collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_sd, optim_sd = get_state_dict(trainer.logprob_model, trainer.optimizer)
    state = {"model": model_sd, "optim": optim_sd}
    with warnings.catch_warnings():  # one rank without a process group is the intended single-process load
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        dcp.load(state, checkpoint_id=str(Path(folder) / SHARDED))
    set_state_dict(trainer.logprob_model, trainer.optimizer, model_state_dict=state["model"],
                   optim_state_dict=state["optim"])


def named_optimizer_state(index_state: dict[str, Any], trainer: PolicyTrainer) -> dict[str, Any]:
    """A `torch.optim` state dict keyed by parameter index, re-keyed by parameter name (DCP's full format)."""
    names = {id(p): n for n, p in trainer.logprob_model.named_parameters()}
    flat = [names[id(p)] for g in trainer.optimizer.param_groups for p in g["params"]]
    return {
        "state": {flat[int(i)]: s for i, s in index_state["state"].items()},
        "param_groups": [{**g, "params": [flat[int(i)] for i in g["params"]]} for g in index_state["param_groups"]],
    }


def load_full_optimizer(index_state: dict[str, Any] | None, trainer: PolicyTrainer) -> None:
    """A one-rank checkpoint's optimizer state (`torch.optim` format) into every rank's shards; rank 0
    passes it, the others None (collective)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    full = named_optimizer_state(index_state, trainer) if index_state is not None else {}
    opts = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    set_optimizer_state_dict(trainer.logprob_model, trainer.optimizer, full, options=opts)
