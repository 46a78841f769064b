"""Trainer ranks on `torch.distributed`: the process group, rank 0's command channel, the serve loop.

Every rank holds a `PolicyTrainer` whose root module is sharded with FSDP2
(`scalerl.trainer.distributed.sharding`). Rank 0 alone runs the training loop; ranks 1..N-1 run `serve`,
which waits for rank 0's next command and executes the same handler rank 0 executes:

    step(shard)        accumulate this rank's shard (+ zero-weight padding micro-batches), clip, AdamW
    optimizer_step     an update without gradients (a step whose groups were all dropped)
    gather             the full weights, collectively (rank 0 keeps them), then a barrier
    broadcast          rank 0's full weights into every rank's shards
    save / load        the sharded model and optimizer with torch.distributed.checkpoint
    load_optimizer     a one-rank checkpoint's full optimizer state, broadcast from rank 0
    logprobs(row)      the trainer's token logprobs of one packed row (for checks against generators)
    stop               leave the process group and exit

Two process groups with finite timeouts, so a rank that never joins a collective is an error, not a
hang: the default group (gloo on CPU, NCCL on GPU) carries FSDP's and the checkpoint's collectives
and times out after `timeout_s`; a gloo "control" group carries the commands and may idle for
`idle_timeout_s` (ranks > 0 wait there while rank 0 generates and validates).

A handler that raises on a rank > 0 is reported to rank 0 (its traceback) at the end of the command
when the collectives still complete; otherwise rank 0 fails at its next collective within the timeout.
Not guaranteed: recovering from a lost rank (the run stops; resume from the last checkpoint).
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist
from pydantic import Field
from scalerl.env.contracts.records import Strict
from scalerl.trainer.core.lora_config import LoraConfig
from scalerl.trainer.core.recipe_config import LossConfig, OptimConfig
from scalerl.trainer.core.update import PolicyTrainer
from scalerl.trainer.distributed import sharding

log = logging.getLogger(__name__)


class RankSpec(Strict):
    """What one rank needs to join the group and build its trainer (sent to ranks > 0 as JSON)."""

    rank: int = Field(ge=0)
    world_size: int = Field(ge=1)
    init_method: str = Field(description="tcp://host:port of rank 0's rendezvous store")
    backend: Literal["gloo", "nccl"]
    device: str
    timeout_s: float = Field(gt=0)
    idle_timeout_s: float = Field(gt=0)
    torch_threads: int = Field(default=1, ge=1)
    builder: str = Field(description="module:function returning the policy architecture (weights come from rank 0)")
    builder_args: dict[str, Any] = Field(default_factory=dict)
    optim: OptimConfig
    loss: LossConfig
    temperature: float = Field(default=1.0, gt=0, description="the engine's sampling temperature (logprobs at it)")
    lora: LoraConfig = Field(default_factory=LoraConfig, description="adapters only (scalerl.trainer.core.lora)")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` now (rank 0 picks the rendezvous port; a race with another process is
    possible and surfaces as a bind error at start)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def join(spec: RankSpec) -> Any:
    """Join the default process group and create the gloo control group; returns the control group."""
    if spec.backend == "nccl":
        torch.cuda.set_device(torch.device(spec.device))
    dist.init_process_group(spec.backend, init_method=spec.init_method, rank=spec.rank,
                            world_size=spec.world_size, timeout=timedelta(seconds=spec.timeout_s))
    return dist.new_group(backend="gloo", timeout=timedelta(seconds=spec.idle_timeout_s))


def leave() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def build_policy(builder: str, builder_args: dict[str, Any]) -> torch.nn.Module:
    module, _, fn = builder.partition(":")
    return getattr(importlib.import_module(module), fn)(**builder_args)


def build_trainer(model: torch.nn.Module, optim: OptimConfig, loss: LossConfig, *, temperature: float,
                  lora: LoraConfig, world_size: int = 1) -> PolicyTrainer:
    """A rank's trainer on `model` (on the rank's device already): adapters when `lora.enabled`
    (`scalerl.trainer.core.lora`: AdamW then sees the adapters only), sharded before AdamW is built when
    `world_size` > 1."""
    from functools import partial

    from scalerl.trainer.core.update import autocast_dtype

    if lora.enabled:
        from scalerl.trainer.core.lora import apply_lora

        apply_lora(model, lora)
    device = next(model.parameters()).device
    param_dtype = autocast_dtype(optim.precision, device)  # bf16: FSDP2 mixed precision
    shard = partial(sharding.shard_policy, param_dtype=param_dtype) if world_size > 1 else None
    return PolicyTrainer(model, optim, loss, temperature=temperature, shard=shard)


def spec_trainer(spec: RankSpec, model: torch.nn.Module) -> PolicyTrainer:
    """The trainer of the rank `spec` describes, `model` moved to its device."""
    return build_trainer(model.to(spec.device), spec.optim, spec.loss, temperature=spec.temperature,
                         lora=spec.lora, world_size=spec.world_size)


# ------------------------------------------------------------------------------------------------ handlers
@dataclass
class RankState:
    """What the handlers work on: this rank's trainer, rank number and control group."""

    trainer: PolicyTrainer
    rank: int
    control: Any


def _step(st: RankState, shard: Any) -> tuple[list[dict[str, float]], dict[str, float]]:
    parts = st.trainer.accumulate_shard(shard)
    return parts, st.trainer.optimizer_step()


def _optimizer_step(st: RankState, _: Any) -> dict[str, float]:
    return st.trainer.optimizer_step()


def _gather(st: RankState, _: Any) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    weights, stats = sharding.timed_gather(st.trainer.logprob_model)
    dist.barrier()  # the gather has finished on every rank before rank 0 talks to any generator
    return weights, stats


def _broadcast(st: RankState, weights: Any) -> None:
    sharding.broadcast_weights(st.trainer.logprob_model, weights or {})


def _save(st: RankState, folder: str) -> None:
    from scalerl.trainer.core.sharded_checkpoint import save_sharded

    save_sharded(folder, st.trainer)


def _load(st: RankState, folder: str) -> None:
    from scalerl.trainer.core.sharded_checkpoint import load_sharded

    load_sharded(folder, st.trainer)


def _load_optimizer(st: RankState, folder: str | None) -> None:
    from scalerl.trainer.core.checkpoint import STATE_PT
    from scalerl.trainer.core.sharded_checkpoint import load_full_optimizer

    state = None  # only rank 0 reads the file; the others receive their shards
    if folder is not None:
        state = torch.load(Path(folder) / STATE_PT, map_location="cpu", weights_only=True)["optimizer"]
    load_full_optimizer(state, st.trainer)


def _logprobs(st: RankState, row: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """The trainer's token logprobs of one packed row (every rank gets the same row: FSDP gathers)."""
    ids, pos = (t.to(st.trainer.device) for t in row)
    root = st.trainer.logprob_model
    with torch.no_grad(), st.trainer._autocast():
        out = root(ids, pos).cpu()
    if hasattr(root, "reshard"):  # FSDP keeps the root unsharded after a forward without backward
        root.reshard()
    return out


def _stop(st: RankState, _: Any) -> None:
    return None


HANDLERS: dict[str, Callable[[RankState, Any], Any]] = {
    "step": _step, "optimizer_step": _optimizer_step, "gather": _gather, "broadcast": _broadcast,
    "save": _save, "load": _load, "load_optimizer": _load_optimizer, "logprobs": _logprobs,
    "stop": _stop,
}
# Results that stay on the rank (rank 0 keeps its own; the other ranks' are not sent back).
LOCAL_RESULTS = {"gather", "broadcast", "save", "load", "load_optimizer", "logprobs", "stop"}


def run_command(st: RankState, name: str, args: list[Any] | None = None) -> tuple[Any, list[Any]]:
    """Rank 0: send `name` (and `args[r]` to rank r) to every rank, run it here too, collect results.

    Returns (rank 0's result, every rank's shared result); raises when a rank > 0 failed."""
    world = dist.get_world_size()
    dist.broadcast_object_list([name], src=0, group=st.control)
    mine: list[Any] = [None]
    dist.scatter_object_list(mine, list(args) if args is not None else [None] * world, src=0, group=st.control)
    try:
        result, reply = HANDLERS[name](st, mine[0]), None
    except Exception:  # still answer the gather, so the other ranks are not left waiting in it
        result, reply = None, ("error", traceback.format_exc())
    gathered: list[Any] = [None] * world
    reply = reply or ("ok", None if name in LOCAL_RESULTS else result)
    dist.gather_object(reply, gathered, dst=0, group=st.control)
    failed = [(r, g[1]) for r, g in enumerate(gathered) if g[0] == "error"]
    if failed:
        raise RuntimeError(f"trainer rank {failed[0][0]} failed in {name!r}:\n{failed[0][1]}")
    return result, [g[1] for g in gathered]


def serve(st: RankState) -> None:
    """Ranks > 0: execute rank 0's commands until `stop` (or until a handler fails: then report and exit)."""
    while True:
        box: list[Any] = [None]
        dist.broadcast_object_list(box, src=0, group=st.control)
        name = box[0]
        mine: list[Any] = [None]
        dist.scatter_object_list(mine, None, src=0, group=st.control)
        try:
            result = HANDLERS[name](st, mine[0])
            reply = ("ok", None if name in LOCAL_RESULTS else result)
        except Exception:
            log.exception("rank %d: command %r failed", st.rank, name)
            reply = ("error", traceback.format_exc())
        dist.gather_object(reply, None, dst=0, group=st.control)
        if name == "stop" or reply[0] == "error":
            return


def _die_with_parent() -> None:
    """Linux: SIGTERM this rank when the process that launched it dies (no orphaned ranks)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main_worker(spec: RankSpec) -> None:
    """A rank > 0 from its spec: join, build and shard the policy, take rank 0's weights, serve."""
    torch.set_num_threads(spec.torch_threads)
    control = join(spec)
    try:
        trainer = spec_trainer(spec, build_policy(spec.builder, spec.builder_args))
        st = RankState(trainer, spec.rank, control)
        serve(st)
    finally:
        leave()


def main() -> None:
    """`python -m scalerl.trainer.distributed.ranks`, the `RankSpec` as JSON on stdin
    (`scalerl.trainer.distributed.launch_ranks`)."""
    logging.basicConfig(level=os.environ.get("SCALERL_RANK_LOG", "WARNING"),
                        format="%(asctime)s rank %(process)d %(levelname)s %(name)s: %(message)s")
    _die_with_parent()
    main_worker(RankSpec.model_validate_json(sys.stdin.read()))


if __name__ == "__main__":
    main()
