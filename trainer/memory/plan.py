"""The memory plan of a run: per device, what the trainer, the engines and validation hold at their peak.

Built from the model's shape (`scalerl.trainer.memory.shapes.ModelShape`, i.e. config.json alone), the sections
of the resolved configuration it reads (`scalerl.trainer.memory.plan_inputs.PlanInputs`, `TrainConfig.plan_inputs()`)
and the placement they imply, before any weight is loaded:

- trainer rank r (`trainer_ranks.count` = N; rank 0 on `engine.device`, rank r on the r-th GPU):
  `parameters`, `gradients`, `optimizer states` (AdamW: two moments) in the trainer's dtype (the loader
  keeps fp32 master weights), each / N under FSDP2; with N > 1 the `FSDP all-gather`: the root
  group unsharded (embedding, untied head, final norm: FSDP2 keeps the root gathered from forward to
  the end of backward) and its all-gather output (alive until the first layer's all-gather), in fp32,
  plus two decoder layers (the current one and the prefetched next), in bf16 when the precision is
  bf16 (FSDP2's mixed-precision policy, `scalerl.trainer.distributed.sharding`); on rank 0, the plain `mirror` copy
  that the torch engine and checkpoints read; `autocast weight copies` (bf16 casts of the matmul weights that
  autocast keeps during a forward, `optim.precision` bf16 on fp32 weights); `activations` of one
  micro-batch (all layers, or with `optim.activation_checkpointing` the layer inputs plus one layer
  recomputed); `logits` (`LOGIT_COPIES` [T, V] fp32 buffers; the FP32 head adds no weight copy since
  the master weights are fp32 already). A micro-batch holds `max(micro_batch_tokens, engine.max_seq_len)`
  tokens: one sample longer than the budget goes alone.
- the generation engine where it runs: the torch engine's `engine weights` and `generation KV cache`
  (`slots × max_seq_len`, slots bounded by `engine.kv_cache_gib`, `scalerl.trainer.memory.kv`), or vLLM's
  `vLLM share` (`engine.vllm.gpu_memory_utilization` of the device) when vLLM runs in this process on
  rank 0's GPU; under Ray with `ray.generator_num_gpus` ≥ 1 each generator has its own device.
- `validation engine`: validation's torch engine (a copy of the weights and a cache bounded the same
  way) on rank 0's device while the training engine stays alive; none with `engine.name=vllm`
  (validation runs on the run's vLLM engine, inside its share: `scalerl.trainer.run.validation`).

Guaranteed: each term is the formula its docstring line states. Checked against PyTorch's MemTracker
under fake tensors (`scalerl.trainer.memory.measure`, tests/trainer/memory): parameters, gradients, optimizer
states and the KV cache exactly, the transient sum (autocast copies + activations + logits) within 15 %
for one rank and for rank 0 of 2 and 8 FSDP2 ranks (`FSDPMemTracker`, fake collectives), whose
`FSDP all-gather` is within 15 % of the most gathered bytes the tracker sees (the plan adds it to the
transient peak although the root's all-gather output is freed before it: conservative by the root
group's size); rank 0's `mirror` is not measured; activations alone are CPU sdpa's (no flash
kernel), so per-layer figures differ by up to ~30 % from the GPU estimate here. `check_fits` names
the largest term of a device that does not fit and the settings that shrink it. Not guaranteed:
allocator fragmentation and CUDA context (a fixed `runtime reserve` of 1 GiB per GPU stands for
them), framework workspaces, vLLM's own split of its share.

Adding a term (e.g. LoRA): `build_plan(shape, inputs, trainable_params=n, extra_terms=[...])`.
`trainable_params` replaces the parameter count that gradients and optimizer states are computed for
(adapters only), and each `extra_terms` entry is a callable `(PlanContext) -> list[Term]` whose terms
are added to the device they name (`PlanContext.trainer_devices`, `.engine_devices`), e.g.
`Term("lora adapters", bytes, device, shrink=("lora.rank",))`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from scalerl.trainer.memory.kv import DTYPE_BYTES, kv_bytes_per_token, slots_for_budget
from scalerl.trainer.memory.plan_inputs import PlanInputs
from scalerl.trainer.memory.shapes import ModelShape

GIB = 1 << 30
RESERVE = GIB
LOGIT_COPIES = 4.25
"""[T, V] fp32 buffers alive at the head's backward peak (the logits, what logsumexp/gather keep, their
gradient and the softmax temporary): 4.0-4.5 measured under MemTracker for 1 k-4 k tokens and two
vocabularies (tests/trainer/memory), with or without `optim.fp32_head`."""
SHRINK = {
    "parameters": ("trainer_ranks.count (FSDP2 shards it)", "a smaller model"),
    "gradients": ("trainer_ranks.count", "lora.enabled=true (adapters only: scalerl.trainer.memory.lora)"),
    "optimizer states": ("trainer_ranks.count", "lora.enabled=true (adapters only: scalerl.trainer.memory.lora)"),
    "mirror": ("ray.trainer_num_gpus with separate generator GPUs",),
    "FSDP all-gather": ("a smaller model",),
    "autocast weight copies": ("optim.precision=fp32", "trainer_ranks.count"),
    "activations": ("optim.activation_checkpointing=true", "optim.micro_batch_tokens", "engine.max_seq_len"),
    "logits": ("engine.max_seq_len (one sample is the smallest micro-batch)", "optim.micro_batch_tokens"),
    "engine weights": ("separate generator GPUs (ray.generator_num_gpus=1)", "engine.name=vllm on its own GPU"),
    "generation KV cache": ("engine.kv_cache_gib", "engine.max_slots", "engine.max_seq_len"),
    "validation engine": ("engine.kv_cache_gib", "engine.max_slots", "validation.enabled=false"),
    "vLLM share": ("engine.vllm.gpu_memory_utilization",
                   "separate generator GPUs (ray.enabled, ray.generator_num_gpus=1)"),
}


@dataclass(frozen=True)
class Term:
    name: str
    bytes: int
    device: str
    detail: str = ""
    shrink: tuple[str, ...] = ()


@dataclass
class PlanContext:
    """What a term function sees: the shape, the plan's inputs, and where things run."""

    shape: ModelShape
    inputs: PlanInputs
    trainer_devices: list[str]
    engine_devices: list[str]
    shared_engine: bool
    micro_batch_tokens: int


@dataclass
class MemoryPlan:
    terms: list[Term]
    capacity: dict[str, int | None]
    notes: list[str] = field(default_factory=list)

    def devices(self) -> list[str]:
        return list(dict.fromkeys(t.device for t in self.terms))

    def total(self, device: str) -> int:
        return sum(t.bytes for t in self.terms if t.device == device)

    def term(self, name: str, device: str | None = None) -> Term:
        device = device or self.devices()[0]
        return next(t for t in self.terms if t.name == name and t.device == device)

    def overruns(self) -> list[str]:
        """Devices whose total exceeds their capacity (capacity unknown: never)."""
        return [d for d in self.devices() if self.capacity.get(d) is not None and self.total(d) > self.capacity[d]]


TermFn = Callable[[PlanContext], list[Term]]


def placement(inputs: PlanInputs) -> tuple[list[str], list[str], bool]:
    """(trainer devices by rank, generation-engine devices, engine shares rank 0's device)."""
    n = inputs.trainer_ranks.count
    base = inputs.engine.device
    if base == "auto":  # what this host resolves it to (CUDA when present, else the CPU)
        from scalerl.trainer.engines.device import resolve_device

        base = resolve_device(base)
    base = "cuda:0" if base == "cuda" else base
    if inputs.trainer_ranks.devices:
        trainers = list(inputs.trainer_ranks.devices)
    elif base == "cpu":
        trainers = ["cpu"] * n
    else:
        trainers = [base] + [f"cuda:{r}" for r in range(1, n)]
    if inputs.ray.enabled and inputs.ray.generator_num_gpus >= 1:
        return trainers, [f"generator {i}" for i in range(inputs.ray.num_generators)], False
    return trainers, [trainers[0]], True


def build_plan(shape: ModelShape, inputs: PlanInputs, *, device_memory: int | None = None,
               trainable_params: int | None = None, extra_terms: Sequence[TermFn] = ()) -> MemoryPlan:
    """The plan of `inputs` for `shape`; `device_memory` is every device's capacity in bytes."""
    trainers, engines, shared = placement(inputs)
    ctx = PlanContext(shape, inputs, trainers, engines, shared,
                      max(inputs.optim.micro_batch_tokens, inputs.engine.max_seq_len))
    terms: list[Term] = []
    for rank, dev in enumerate(trainers):
        dev_name = dev if len(set(trainers)) == len(trainers) else f"{dev} (rank {rank})"
        terms += trainer_terms(ctx, rank, dev_name, trainable_params)
    engine_dev = terms[0].device if shared else None
    for dev in engines:
        terms += engine_terms(ctx, engine_dev or dev, capacity=device_memory)
    if inputs.validation_enabled and inputs.engine.name != "vllm":  # vLLM: validation shares the run's engine
        terms.append(validation_term(ctx, terms[0].device))
    for fn in extra_terms:
        terms += fn(ctx)
    capacity = {d: device_memory for d in dict.fromkeys(t.device for t in terms)}
    notes = [f"micro-batch: {ctx.micro_batch_tokens} tokens (max of optim.micro_batch_tokens and engine.max_seq_len)"]
    if device_memory is not None:
        terms += [Term("runtime reserve", RESERVE, d, "CUDA context, allocator slack") for d in capacity
                  if not d.startswith("cpu")]
    return MemoryPlan(terms, capacity, notes)


def _t(name: str, nbytes: float, device: str, detail: str) -> Term:
    return Term(name, int(nbytes), device, detail, SHRINK.get(name, ()))


def trainer_terms(ctx: PlanContext, rank: int, device: str, trainable: int | None) -> list[Term]:
    s, optim = ctx.shape, ctx.inputs.optim
    n = len(ctx.trainer_devices)
    pb = DTYPE_BYTES["float32"]  # the loader keeps fp32 master weights
    trainable = s.params if trainable is None else trainable
    # as scalerl.trainer.core.update.autocast_dtype: auto = bf16 on a (bf16-capable) GPU, fp32 on the CPU
    bf16 = optim.precision == "bf16" or (optim.precision == "auto" and not device.startswith("cpu"))
    terms = [_t("parameters", s.params * pb / n, device, f"{s.params / 1e9:.3f} B x {pb} B / {n} rank(s)"),
             _t("gradients", trainable * pb / n, device, f"{trainable / 1e9:.3f} B trainable x {pb} B / {n}"),
             _t("optimizer states", 2 * trainable * pb / n, device, "AdamW exp_avg + exp_avg_sq")]
    if n > 1:
        root = s.params - s.layers * s.layer_params  # the root group: embedding, untied head, final norm
        lb = 2 if bf16 else pb  # FSDP2 mixed precision gathers the layers in bf16, the root in fp32
        terms.append(_t("FSDP all-gather", 2 * root * pb + 2 * s.layer_params * lb, device,
                        f"root group unsharded + its all-gather output (fp32), two decoder layers ({lb} B)"))
        if rank == 0:
            terms.append(_t("mirror", s.params * pb, device, "rank 0's plain copy for the engine and checkpoints"))
    if bf16:
        terms.append(_t("autocast weight copies", s.layers * s.layer_params * 2, device,
                        "bf16 casts of the decoder's matmul weights during a forward"))
    t = ctx.micro_batch_tokens
    terms.append(_t("activations", activation_bytes(s, t, bf16, optim.activation_checkpointing), device,
                    f"{t} tokens, checkpointing {'on' if optim.activation_checkpointing else 'off'}"))
    terms.append(_t("logits", t * s.vocab * 4 * LOGIT_COPIES, device,
                    f"{LOGIT_COPIES:g} x [{t}, {s.vocab}] fp32 at the backward peak"))
    return terms


def layer_activation_bytes(s: ModelShape, bf16: bool) -> int:
    """Bytes one token leaves saved for backward in one decoder layer (HF Llama/Qwen2, sdpa).

    RMSNorm saves its input, the fp32 upcast and the normalized output (x2 norms); attention saves
    q, k, v, the rotary outputs, the attention output and o_proj's input; the SwiGLU MLP saves gate,
    up, silu(gate) and their product."""
    a = 2 if bf16 else 4
    norms = 2 * (a * s.hidden + 4 * s.hidden + a * s.hidden)
    attn = a * (3 * s.q_dim + 4 * s.kv_dim + 2 * s.q_dim)
    mlp = a * 4 * s.intermediate
    return norms + attn + mlp


def activation_bytes(s: ModelShape, tokens: int, bf16: bool, checkpointing: bool) -> int:
    per_layer = layer_activation_bytes(s, bf16)
    if checkpointing:  # each layer keeps its input; one layer is recomputed at a time
        return tokens * (s.layers * s.hidden * (2 if bf16 else 4) + per_layer)
    return tokens * s.layers * per_layer


def engine_kv(ctx: PlanContext, slots: int) -> tuple[int, int]:
    """(slots the budget allows, KV bytes) of a torch engine of the run."""
    e, s = ctx.inputs.engine, ctx.shape
    per_tok = kv_bytes_per_token(s.layers, s.kv_heads, s.head_dim, e.dtype)
    budget = None if e.kv_cache_gib is None else e.kv_cache_gib * GIB
    slots = slots_for_budget(budget, slots, e.max_seq_len, per_tok)
    return slots, slots * e.max_seq_len * per_tok


def engine_terms(ctx: PlanContext, device: str, *, capacity: int | None) -> list[Term]:
    e, s = ctx.inputs.engine, ctx.shape
    if e.name == "vllm":
        util = e.vllm.gpu_memory_utilization
        nbytes = util * capacity if capacity is not None else 0
        return [_t("vLLM share", nbytes, device, f"gpu_memory_utilization {util:g}"
                   + ("" if capacity is not None else " of the device (capacity unknown)"))]
    slots, kv = engine_kv(ctx, e.max_slots)
    eb = DTYPE_BYTES[e.dtype]
    return [_t("engine weights", s.params * eb, device, f"torch engine copy in {e.dtype}"),
            _t("generation KV cache", kv, device, f"{slots} slots x {e.max_seq_len} tokens")]


def validation_term(ctx: PlanContext, device: str) -> Term:
    """Validation's torch engine: a weight copy and a cache of the slots the budget allows."""
    e, s = ctx.inputs.engine, ctx.shape
    slots, kv = engine_kv(ctx, e.max_slots)
    weights = s.params * DTYPE_BYTES[e.dtype]
    return _t("validation engine", weights + kv, device, f"weights + {slots} slots x {e.max_seq_len} tokens (waves)")


class PlanDoesNotFit(ValueError):
    """A device's planned bytes exceed its capacity; the message names the largest term and its shrinkers."""


def gib(nbytes: float) -> str:
    return f"{nbytes / GIB:.2f} GiB"


def check_fits(plan: MemoryPlan) -> None:
    """Raise `PlanDoesNotFit` for the first device over capacity: its total, capacity, largest term and
    the settings that shrink that term (and the next largest one). Devices of unknown capacity pass."""
    for dev in plan.overruns():
        terms = sorted((t for t in plan.terms if t.device == dev), key=lambda t: -t.bytes)
        top = terms[0]
        lines = [f"memory plan: {dev} needs {gib(plan.total(dev))} but has {gib(plan.capacity[dev] or 0)}; "
                 f"largest term: {top.name} {gib(top.bytes)} ({top.detail})"]
        for t in terms[:2]:
            if t.shrink:
                lines.append(f"  to shrink {t.name}: " + "; ".join(t.shrink))
        lines.append("  the whole plan: scalerl train --dry-run")
        raise PlanDoesNotFit("\n".join(lines))


def render(plan: MemoryPlan) -> str:
    """The plan as text: per device its terms (largest first), total and capacity, then the notes."""
    out = []
    for dev in plan.devices():
        cap = plan.capacity.get(dev)
        total = plan.total(dev)
        verdict = "" if cap is None else (" fits" if total <= cap else " DOES NOT FIT")
        out.append(f"{dev}: {gib(total)}" + ("" if cap is None else f" of {gib(cap)}") + verdict)
        for t in sorted((t for t in plan.terms if t.device == dev), key=lambda t: -t.bytes):
            out.append(f"  {t.name:<24} {gib(t.bytes):>12}  {t.detail}")
    return "\n".join(out + [f"note: {n}" for n in plan.notes])
