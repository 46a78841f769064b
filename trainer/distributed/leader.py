"""Rank 0's handle on the trainer ranks: one code path for 1 or N ranks.

`RankGroup.start(...)` builds rank 0's `PolicyTrainer` and, for N > 1, starts ranks 1..N-1
(`scalerl.trainer.distributed.launch_ranks`), joins the process groups and broadcasts rank 0's weights.
Then, for any N:

- `step(batch)`: the update step of a run, the only one: the aggregation weights are computed on the
  whole batch and the batch is cut into N shards at sample boundaries, balanced by tokens
  (`sharding.cut_batch`), one per rank; every rank accumulates its shard and steps AdamW; the metrics
  of all micro-batches are merged on rank 0. With N = 1 the one shard is the whole batch and the
  handler runs in this process (no process group).
- `gather_weights()`: the full weights under Hugging Face names for the generators. N = 1: the
  model's own tensors, as before. N > 1: gathered collectively (finished on every rank before it
  returns), then copied into `mirror`, the plain model rank 0 keeps for the engine, validation and
  the Hugging Face checkpoint files.
- `save_checkpoint` / `load_checkpoint`: `scalerl.trainer.core.checkpoint` plus, for N > 1, the sharded model
  and optimizer in torch.distributed.checkpoint format, so a run resumes with any number of ranks.
- LoRA (`lora.enabled`, one rank): the trainer adapts a copy of the model (`scalerl.trainer.core.lora`) and the
  mirror is the plain model, refreshed with the merged weights at each `gather_weights` and checkpoint.

Memory of rank 0 for N > 1: its shard + the mirror (full weights) + the gathered copy during a push.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from pathlib import Path
from typing import Any

import torch
from scalerl.trainer.core.lora_config import LoraConfig
from scalerl.trainer.core.recipe_config import LossConfig, OptimConfig
from scalerl.trainer.core.update import PackedBatch, PolicyTrainer, merge_metrics
from scalerl.trainer.distributed import ranks as rk
from scalerl.trainer.distributed import sharding
from scalerl.trainer.distributed.placement_config import RayConfig, TrainerRanksConfig
from torch import nn

log = logging.getLogger(__name__)


class RankGroup:
    """See the module docstring. Build with `RankGroup.start`."""

    def __init__(self, trainer: PolicyTrainer, mirror: nn.Module, state: rk.RankState | None = None,
                 launched: Any = None) -> None:
        self.trainer, self.mirror, self._state, self._launched = trainer, mirror, state, launched
        self.world_size = 1 if state is None else torch.distributed.get_world_size()
        self.last_push: dict[str, float] = {}
        self._failed = False  # a command failed: ranks > 0 have exited or may be stuck; close() ends them

    @classmethod
    def single(cls, model: nn.Module, optim: OptimConfig, loss: LossConfig, *, temperature: float = 1.0,
               lora: LoraConfig | None = None) -> RankGroup:
        """One rank in this process, on `model`'s device (no process group). With `lora.enabled` the trainer
        adapts a copy and `model` stays the plain (merged) mirror."""
        lora = lora or LoraConfig()
        trainer = rk.build_trainer(copy.deepcopy(model) if lora.enabled else model, optim, loss,
                                   temperature=temperature, lora=lora)
        return cls(trainer, model)

    @classmethod
    def start(cls, model: nn.Module, spec: rk.RankSpec, *, launch: Any = None,
              devices: list[str] | None = None) -> RankGroup:
        """Rank 0 for `spec` (rank 0's spec; `model` holds the weights to start from). `launch(specs)`
        starts ranks 1..N-1 from their specs (default: child processes); `devices[r]` is rank r's."""
        if spec.world_size == 1:
            return cls.single(model.to(spec.device), spec.optim, spec.loss, temperature=spec.temperature,
                              lora=spec.lora)
        from scalerl.trainer.distributed.launch_ranks import ProcessRanks

        specs = [spec.model_copy(update={"rank": r, "device": devices[r] if devices else _device_of(spec.device, r)})
                 for r in range(1, spec.world_size)]
        launched = (launch or ProcessRanks)(specs)
        try:
            control = _join_watching(spec, launched)
            trainer = rk.spec_trainer(spec, copy.deepcopy(model))
            group = cls(trainer, model, rk.RankState(trainer, 0, control), launched)
            group.broadcast_from_mirror()
            return group
        except BaseException:
            launched.close(timeout_s=5)
            rk.leave()
            raise

    # ---------------------------------------------------------------------------------------- update
    def step(self, batch: PackedBatch) -> dict[str, float]:
        """One optimizer step of all ranks on `batch` (see the module docstring)."""
        shards = sharding.cut_batch(batch, self.trainer.loss_cfg.aggregation, self.world_size,
                                    self.trainer.optim_cfg.micro_batch_tokens)
        _, per_rank = self._run("step", shards)
        parts = [p for rank_parts, _ in per_rank for p in rank_parts]
        merged = merge_metrics(parts)
        merged["micro_batches"] = float(len(parts))
        if self.world_size > 1:
            merged["ranks/micro_batches_per_rank"] = float(shards[0].micro_batches)
            merged["ranks/grad_norm_spread"] = _spread([m["grad_norm"] for _, m in per_rank])
        return {**merged, **per_rank[0][1]}

    def optimizer_step(self) -> dict[str, float]:
        """An update without gradients on every rank (a step whose groups were all dropped)."""
        return self._run("optimizer_step")[0]

    # ---------------------------------------------------------------------------------------- weights
    def gather_weights(self) -> dict[str, torch.Tensor]:
        """Full weights with Hugging Face names for the generators (see the module docstring)."""
        if self._state is None:
            if self.trainer.model is not self.mirror:  # LoRA: the merged policy into the mirror
                from scalerl.trainer.core.lora import merged_state_dict

                self.mirror.load_state_dict(merged_state_dict(self.trainer.model))
            return {k: v.detach() for k, v in self.mirror.state_dict().items()}
        t0 = time.perf_counter()
        (weights, stats), _ = rk.run_command(self._state, "gather")
        with torch.no_grad():
            self.mirror.load_state_dict(weights)
        self.last_push = {**stats, "push/gather_total_s": time.perf_counter() - t0}
        log.debug("gathered %.1f MB in %.2f s", stats["push/gather_bytes"] / 1e6, stats["push/gather_s"])
        return {k: v.detach() for k, v in self.mirror.state_dict().items()}

    def broadcast_from_mirror(self) -> None:
        """Rank 0's plain model weights into every rank's shards (at start and after loading HF weights)."""
        if self._state is not None:
            weights = {k: v.detach().cpu() for k, v in self.mirror.state_dict().items()}
            rk.run_command(self._state, "broadcast", [weights] + [None] * (self.world_size - 1))

    def logprobs(self, input_ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """The trainer's token logprobs of one packed row, through the (sharded) root module of every rank."""
        return self._run("logprobs", [(input_ids.cpu(), position_ids.cpu())] * self.world_size)[0]

    # ---------------------------------------------------------------------------------------- checkpoints
    def save_checkpoint(self, folder: str | Path, *, extra: dict | None = None, **kwargs: Any) -> Path:
        """`scalerl.trainer.core.checkpoint.save_checkpoint` of the mirror and rank 0's trainer (same keywords);
        for N > 1 every rank also writes its shards of model and optimizer."""
        from scalerl.trainer.core.checkpoint import save_checkpoint

        if self._state is None:
            self.gather_weights()  # LoRA: the mirror holds the merged policy the checkpoint's HF files show
            return save_checkpoint(folder, self.mirror, self.trainer, extra=extra, **kwargs)

        def write_sharded(tmp: Path) -> None:
            rk.run_command(self._state, "save", [str(tmp)] * self.world_size)

        extra = {**(extra or {}), "trainer_ranks": self.world_size}
        return save_checkpoint(folder, self.mirror, self.trainer, extra=extra, sharded=write_sharded, **kwargs)

    def load_checkpoint(self, folder: str | Path) -> dict[str, Any]:
        """Resume from a checkpoint written with any number of ranks; returns its JSON summary."""
        from scalerl.trainer.core.checkpoint import load_checkpoint
        from scalerl.trainer.core.sharded_checkpoint import has_sharded

        if self._state is None:
            return load_checkpoint(folder, self.mirror, self.trainer)
        summary = load_checkpoint(folder, self.mirror)  # HF weights into the mirror
        self.broadcast_from_mirror()
        if has_sharded(folder):
            rk.run_command(self._state, "load", [str(folder)] * self.world_size)
        else:  # written by one rank: its full optimizer state, broadcast from rank 0
            rk.run_command(self._state, "load_optimizer", [str(folder)] + [None] * (self.world_size - 1))
        _restore_rank0_state(folder, self.trainer)
        return summary

    def _run(self, name: str, args: list[Any] | None = None) -> tuple[Any, list[Any]]:
        """Command `name` on every rank (`ranks.run_command`); with one rank, the same handler here."""
        if self._state is None:
            result = rk.HANDLERS[name](rk.RankState(self.trainer, 0, None), args[0] if args else None)
            return result, [result]
        try:
            return rk.run_command(self._state, name, args)
        except BaseException:
            self._failed = True
            raise

    def close(self) -> None:
        """Stop ranks > 0 and leave the process group (idempotent; kills ranks that do not answer)."""
        if self._state is None:
            return
        state, self._state = self._state, None
        try:
            if not self._failed:
                rk.run_command(state, "stop")
        except Exception:  # a rank already gone: its processes are ended below
            log.warning("trainer ranks did not stop cleanly", exc_info=True)
        finally:
            self._launched.close()
            rk.leave()


def start_ranks(model: nn.Module, device: str, ranks: TrainerRanksConfig, ray: RayConfig, *, optim: OptimConfig,
                loss: LossConfig, lora: LoraConfig, temperature: float, torch_threads: int,
                out: Path | None = None) -> RankGroup:
    """The trainer ranks of a run: this process is rank 0 on `device`; ranks 1..N-1 are child processes
    (logs in `out/ranks/`), or Ray actors when the run uses Ray. `temperature` is the engine's sampling
    temperature (the logprobs are taken at it); `torch_threads` is each rank's intra-op thread count."""
    from functools import partial

    from scalerl.trainer.distributed.launch_ranks import ProcessRanks, RayRanks, node_address

    use_ray = ray.enabled and ranks.count > 1
    devices = list(ranks.devices) or None
    if use_ray and devices is None and device.startswith("cuda"):
        devices = ["cuda:0"] * ranks.count  # each rank actor sees its own GPU as the first one
    if device == "cuda":  # a process group needs the index (the engine's "cuda" is the current device)
        device = f"cuda:{torch.cuda.current_device()}"
    rank0_device = devices[0] if devices else device
    addr = ranks.master_addr or node_address(use_ray)
    port = ranks.master_port or (rk.free_port(addr) if ranks.count > 1 else 0)
    backend = ranks.backend if ranks.backend != "auto" else ("nccl" if rank0_device.startswith("cuda") else "gloo")
    spec = rk.RankSpec(
        rank=0, world_size=ranks.count, init_method=f"tcp://{addr}:{port}", backend=backend, device=rank0_device,
        timeout_s=ranks.timeout_s, idle_timeout_s=ranks.idle_timeout_s, torch_threads=torch_threads,
        builder=f"{__name__}:architecture", builder_args=architecture_args(model), optim=optim, loss=loss,
        temperature=temperature, lora=lora)
    launch = (partial(RayRanks, num_cpus=ray.trainer_num_cpus, num_gpus=ray.trainer_num_gpus,
                      resources=ray.trainer_resources) if use_ray
              else partial(ProcessRanks, log_dir=None if out is None else Path(out) / "ranks"))
    return RankGroup.start(model, spec, launch=launch, devices=devices)


def architecture_args(model: nn.Module) -> dict[str, Any]:
    """What `architecture` needs to rebuild `model` on another rank: its config and parameter dtype."""
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    return {"config": json.loads(model.config.to_json_string()), "dtype": dtype}


def architecture(config: dict[str, Any], dtype: str = "float32") -> nn.Module:
    """Rank 0's model architecture from its Hugging Face config, with throwaway weights (rank 0
    broadcasts the real ones); parameters in rank 0's dtype, or FSDP's gathers would not match."""
    from transformers import AutoConfig, AutoModelForCausalLM

    hf_config = AutoConfig.for_model(**config)
    return AutoModelForCausalLM.from_config(hf_config, dtype=getattr(torch, dtype)).to(getattr(torch, dtype))


def _restore_rank0_state(folder: str | Path, trainer: PolicyTrainer) -> None:
    """Scheduler, RNG, step and policy version from `trainer_state.pt` (rank 0's own state)."""
    # The checkpoint module's RNG helper, so one-rank and N-rank resumes restore the RNG the same way.
    from scalerl.trainer.core.checkpoint import STATE_PT, _set_rng_state

    state = torch.load(Path(folder) / STATE_PT, map_location="cpu", weights_only=True)
    trainer.scheduler.load_state_dict(state["scheduler"])
    _set_rng_state(state["rng"])
    trainer.step_count = int(state["step"])
    trainer.policy_version = int(state["policy_version"])


def _spread(values: list[float]) -> float:
    return max(values) - min(values) if values else 0.0


def _device_of(rank0_device: str, rank: int) -> str:
    """Rank r's device when none is configured: CPU for a CPU run, else the r-th CUDA device."""
    if not rank0_device.startswith("cuda"):
        return rank0_device
    return f"cuda:{rank % max(1, torch.cuda.device_count())}"


def _join_watching(spec: rk.RankSpec, launched: Any) -> Any:
    """`ranks.join` for rank 0, failing early when a launched rank dies before the rendezvous."""
    import threading

    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["control"] = rk.join(spec)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=target, name="rank0-join", daemon=True)
    t.start()
    while t.is_alive():
        t.join(0.5)
        failure = launched.failed()
        if failure is not None and t.is_alive():
            raise RuntimeError(f"{failure} before joining the process group")
    if "error" in box:
        raise box["error"]
    return box["control"]
