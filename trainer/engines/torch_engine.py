"""The torch generation engine: batched KV-cache decoding with continuous admission, on CPU or CUDA.

One background thread runs the decode loop: between two decode steps it applies a pending weight
update, admits queued requests into free cache slots (each prompt is prefilled once and its cache
copied to its `samples_per_prompt` slots), decodes one token for every running sequence, and hands
finished groups to `poll`.

Guarantees (the `GenerationEngine` contract):
- `update_weights` is in flight: it is applied between two decode steps; running sequences keep their
  KV cache (computed by the old weights) and sample their next tokens with the new weights. It returns
  once applied. Every token records the policy version that sampled it.
- The recorded logprob is that of the distribution actually sampled from (after temperature, top-k,
  top-p); at temperature 1 without truncation that is the model's own log-softmax.
- Interruption: after `think_budget_tokens` sampled tokens without a stop the phrase is fed as forced
  tokens (loss_mask 0), then up to `answer_budget_tokens` more are sampled; a sample that still does
  not stop finishes with reason `length` (truncated) and `interrupted=True`.
- Stop tokens are kept at the end of `token_ids` (the policy learns to stop).
- `SamplingParams.seed`: each sample of such a request draws from its own generator, seeded
  `sampling.sample_seed(index)` (the vLLM engine's rule), so a request's tokens do not depend on the
  other requests in flight; requests without a seed share the engine's generator (`seed=`).

Not guaranteed: the order in which groups finish; bitwise reproducibility across devices or batch
compositions (a seeded request reproduces its tokens on one machine as long as its logits do; an
unseeded one needs the same engine seed and the same submission order).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from scalerl.trainer.engines.base import (
    EngineStats,
    GeneratedGroup,
    GeneratedSample,
    GenerationRequest,
    SamplingParams,
    ThreadedEngine,
)
from scalerl.trainer.engines.torch_decoder import SlotDecoder

log = logging.getLogger(__name__)


@dataclass
class _Seq:
    group: _Group
    index: int
    pos: int  # next cache position to write (= current length)
    last_token: int
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    sampled: int = 0  # sampled tokens in the current phase
    forced: deque = field(default_factory=deque)
    interrupted: bool = False
    gen: torch.Generator | None = None  # the sample's own stream (SamplingParams.seed), else the engine's


@dataclass
class _Group:
    request: GenerationRequest
    samples: list[GeneratedSample | None]

    @property
    def done(self) -> bool:
        return all(s is not None for s in self.samples)


@dataclass
class TorchEngineStats(EngineStats):
    decode_steps: int = 0
    prefill_tokens: int = 0


class TorchEngine(ThreadedEngine):
    """See the module docstring. `model` is a `transformers` causal LM (its weights are copied)."""

    def __init__(self, model: Any, *, eos_token_id: int, device: str = "cpu", dtype: torch.dtype | None = None,
                 max_slots: int = 256, max_seq_len: int = 512, fp32_head: bool = True, seed: int = 0,
                 policy_version: int = 0) -> None:
        self.decoder = SlotDecoder(model, device=device, dtype=dtype, max_slots=max_slots,
                                   max_seq_len=max_seq_len, fp32_head=fp32_head)
        self.eos_token_id = eos_token_id
        self.device = self.decoder.device
        self._gen = torch.Generator(device=self.device).manual_seed(seed)
        self._version = policy_version
        self._queue: deque[_Group] = deque()
        self._active: list[_Seq] = []
        self._init_handoff("torch engine")
        self._update: tuple[Mapping[str, Any], int, threading.Event] | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        self._stats = TorchEngineStats()

    # ------------------------------------------------------------------------------------ interface
    @property
    def policy_version(self) -> int:
        return self._version

    def submit(self, request: GenerationRequest) -> None:
        request.check_fits(self.decoder.max_seq_len)
        if request.samples_per_prompt > self.decoder.max_slots:
            raise ValueError(f"samples_per_prompt {request.samples_per_prompt} > max_slots {self.decoder.max_slots}")
        with self._cv:
            self._raise_if_failed()
            self._queue.append(_Group(request, [None] * request.samples_per_prompt))
            self._pending += 1
            self._cv.notify_all()
        self._ensure_thread()

    def update_weights(self, weights: Mapping[str, Any], policy_version: int) -> None:
        self.decoder.check_weights(weights)
        done = threading.Event()
        with self._cv:
            self._raise_if_failed()
            if self._thread is None:
                self._apply_update(weights, policy_version)
                return
            self._update = (weights, policy_version, done)
            self._cv.notify_all()
        while not done.wait(0.5):
            with self._cv:
                self._raise_if_failed()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    # ------------------------------------------------------------------------------------ loop
    def _ensure_thread(self) -> None:
        with self._cv:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="torch-engine", daemon=True)
                self._thread.start()

    def _apply_update(self, weights: Mapping[str, Any], version: int) -> None:
        self.decoder.load_weights(weights)
        self._version = version
        self.stats.weight_updates += 1

    def _run(self) -> None:
        try:
            while True:
                with self._cv:
                    if self._update is not None:
                        weights, version, done = self._update
                        self._update = None
                        self._apply_update(weights, version)
                        done.set()
                    if self._closed:
                        return
                    if not self._active and not self._queue:
                        t0 = time.perf_counter()
                        self._cv.wait(0.1)
                        self.stats.idle_s += time.perf_counter() - t0
                        continue
                    admitted = self._take_admissions()
                t0 = time.perf_counter()
                if admitted:
                    self._prefill(admitted)
                self._decode_step()
                self.stats.busy_s += time.perf_counter() - t0
        except BaseException as exc:  # surfaced to the caller by poll/submit/update_weights
            log.exception("torch engine loop failed")
            with self._cv:
                self._error = exc
                self._cv.notify_all()

    def _take_admissions(self) -> list[_Group]:
        free = self.decoder.max_slots - len(self._active)
        taken = []
        while self._queue and self._queue[0].request.samples_per_prompt <= free:
            group = self._queue.popleft()
            free -= group.request.samples_per_prompt
            taken.append(group)
        return taken

    # ------------------------------------------------------------------------------------ compute
    def _prefill(self, groups: list[_Group]) -> None:
        """Prefill each prompt once into its first slot, copy to the others, sample first tokens."""
        dev = self.device
        base = len(self._active)
        lens = [len(g.request.prompt_token_ids) for g in groups]
        width = max(lens)
        tokens = torch.zeros((len(groups), width), dtype=torch.long)
        for row, g in enumerate(groups):
            tokens[row, : lens[row]] = torch.tensor(g.request.prompt_token_ids)
        first_slots, slot = [], base
        for g in groups:
            first_slots.append(slot)
            slot += g.request.samples_per_prompt
        lens_t = torch.tensor(lens, device=dev)
        pos = torch.arange(width, device=dev)
        causal = pos[None, :, None] >= pos[None, None, :]
        valid = pos[None, None, :] < lens_t[:, None, None]
        mask = causal & (valid | (pos[None, :, None] == pos[None, None, :]))
        positions = pos[None].expand(len(groups), width)
        logits = self.decoder.forward(tokens.to(dev), positions, torch.tensor(first_slots, device=dev), width, mask)
        last = logits[torch.arange(len(groups), device=dev), lens_t - 1]
        self.stats.prefill_tokens += sum(lens)
        new: list[_Seq] = []
        for row, g in enumerate(groups):
            n = g.request.samples_per_prompt
            if n > 1:
                dst = torch.arange(first_slots[row] + 1, first_slots[row] + n, device=dev)
                self.decoder.copy_slots(first_slots[row], dst, lens[row])
            new += [_Seq(g, i, lens[row], -1, gen=self._sample_generator(g.request.sampling, i)) for i in range(n)]
        row_of = torch.tensor([r for r, g in enumerate(groups) for _ in range(g.request.samples_per_prompt)],
                              device=dev)
        self._active.extend(new)
        self._emit(new, last[row_of])

    def _sample_generator(self, sampling: SamplingParams, index: int) -> torch.Generator | None:
        seed = sampling.sample_seed(index)
        return None if seed is None else torch.Generator(device=self.device).manual_seed(seed)

    def _decode_step(self) -> None:
        seqs = self._active
        if not seqs:
            return
        dev = self.device
        n = len(seqs)
        tokens = torch.tensor([[s.last_token] for s in seqs], device=dev)
        pos = torch.tensor([s.pos for s in seqs], device=dev)
        key_len = int(pos.max()) + 1
        mask = (torch.arange(key_len, device=dev)[None, :] <= pos[:, None])[:, None, :]
        logits = self.decoder.forward(tokens, pos[:, None], torch.arange(n, device=dev), key_len, mask)
        for s in seqs:
            s.pos += 1
        self.stats.decode_steps += 1
        self._emit(seqs, logits[:, 0])

    def _emit(self, seqs: list[_Seq], logits: torch.Tensor) -> None:
        """Sample (or force) the next token of each sequence from `logits` [n, V]; retire finished ones."""
        tokens, logprobs = _sample(logits, [s.group.request.sampling for s in seqs], [s.gen for s in seqs], self._gen)
        done: list[_Seq] = []
        for i, s in enumerate(seqs):
            forced = bool(s.forced)
            tok = s.forced.popleft() if forced else tokens[i]
            lp = logprobs[i] if not forced else float(torch.log_softmax(logits[i].float(), -1)[tok])
            s.tokens.append(tok)
            s.logprobs.append(lp)
            s.versions.append(self._version)
            s.mask.append(0 if forced else 1)
            s.last_token = tok
            if not forced:
                s.sampled += 1
                self.stats.sampled_tokens += 1
            if self._finish_reason(s, tok, forced) is not None:
                done.append(s)
        if done:
            self._retire(done)

    def _finish_reason(self, s: _Seq, tok: int, forced: bool) -> str | None:
        req = s.group.request
        stops = req.sampling.stop_token_ids or [self.eos_token_id]
        reason = None
        if not forced and tok in stops:
            reason = "stop"
        elif s.forced:
            reason = None
        elif s.pos + 1 >= self.decoder.max_seq_len:
            reason = "length"
        elif req.interruption is not None and not s.interrupted and s.sampled >= req.interruption.think_budget_tokens:
            s.interrupted, s.sampled = True, 0
            s.forced.extend(req.interruption.phrase_token_ids)
        elif (req.interruption is not None and s.interrupted and not forced
              and s.sampled >= req.interruption.answer_budget_tokens
              or req.interruption is None and s.sampled >= req.sampling.max_new_tokens):
            reason = "length"
        if reason is not None:
            s.group.samples[s.index] = GeneratedSample(
                sample_index=s.index, token_ids=s.tokens, logprobs=s.logprobs, policy_versions=s.versions,
                loss_mask=s.mask, finish_reason=reason, interrupted=s.interrupted,
            )
        return reason

    def _retire(self, done: list[_Seq]) -> None:
        """Drop finished sequences, moving the last active ones into their slots to keep the cache compact."""
        gone = {id(s) for s in done}
        active = self._active
        keep = [(j, s) for j, s in enumerate(active) if id(s) not in gone]
        for new_slot, (old_slot, s) in enumerate(keep):
            if old_slot != new_slot:
                self.decoder.copy_slots(old_slot, new_slot, s.pos + 1)
        self._active = [s for _, s in keep]
        finished = {id(s.group): s.group for s in done if s.group.done}
        if finished:
            with self._cv:
                self._finished += [GeneratedGroup(request=g.request, samples=g.samples) for g in finished.values()]
                self._cv.notify_all()


def _sample(logits: torch.Tensor, params: list[SamplingParams], own: list[torch.Generator | None],
            shared: torch.Generator) -> tuple[list[int], list[float]]:
    """Sample one token per row, row i from `own[i]` when it has one, the others together from `shared`;
    return tokens and the logprob under the distribution sampled from."""
    logits = logits.float()
    temps = torch.tensor([p.temperature for p in params], device=logits.device)
    logits = logits / temps[:, None]
    for i, p in enumerate(params):
        if p.top_k or p.top_p < 1.0:
            logits[i] = _truncate(logits[i], p.top_k, p.top_p)
    logp = torch.log_softmax(logits, dim=-1)
    probs = logp.exp()
    rest = [i for i, g in enumerate(own) if g is None]
    if len(rest) == len(own):
        tok = torch.multinomial(probs, 1, generator=shared)
    else:
        tok = torch.empty((len(own), 1), dtype=torch.long, device=logits.device)
        if rest:
            tok[rest] = torch.multinomial(probs[rest], 1, generator=shared)
        for i, g in enumerate(own):
            if g is not None:
                tok[i] = torch.multinomial(probs[i : i + 1], 1, generator=g)[0]
    lp = logp.gather(1, tok)
    return tok[:, 0].tolist(), lp[:, 0].tolist()


def _truncate(row: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    if top_k:
        kth = torch.topk(row, min(top_k, row.numel())).values[-1]
        row = row.masked_fill(row < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, idx = torch.sort(row, descending=True)
        cum = torch.softmax(sorted_logits, -1).cumsum(-1)
        drop = cum - torch.softmax(sorted_logits, -1) > top_p
        row = row.masked_fill(torch.zeros_like(drop).scatter(0, idx, drop), float("-inf"))
    return row
