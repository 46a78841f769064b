"""Held-out validation: pass rate per domain of the current policy on problems never trained on.

Each held-out prompt is sampled `ceil(min_evaluations_per_domain / n_prompts)` times at the training
temperature (the sampled pass rate moves ~3x more than greedy on the tiny model); with
`validation.greedy` one greedy (top-k 1) sample per prompt is added and reported separately.

Engines: with `engine.name=torch` a fresh torch engine holds a copy of the current weights (validation
sees exactly one policy version while the training engine keeps generating); its slots are
`engine.max_slots` bounded by `engine.kv_cache_gib` (`scalerl.trainer.engines.factory.build_torch_engine`),
never the evaluation count, so no value of `min_evaluations_per_domain` grows its KV cache; the memory
plan counts it (`scalerl.trainer.memory.plan`, `validation engine`). With `engine.name=vllm` validation runs on
the run's own engine (`validation_engine`: the runtime's `side_channel`, in-process or the Ray
generators): vLLM reserves `gpu_memory_utilization` of its device at start, so where it shares the
trainer's GPU a second instance has no room, and on its own GPUs reusing it costs the trainer device
nothing; the plan then has no validation term. The engine's policy version must equal the trainer's
(the loop validates right after a push and pushes nothing while it validates; checked).

Waves, either engine: a prompt's samples are cut into groups of at most `slots` (the torch engine's
decoder slots, vLLM's `max_num_seqs` = `engine.max_slots`), and at most `slots` samples are queued at
a time (the next group is submitted when one finishes). Not guaranteed: the same per-sample RNG
stream as one big submission; on a shared vLLM engine, how its scheduler interleaves validation's
sequences with training's (its slots and memory bound both together), and that the engine's busy
time (counted as generation compute) excludes validation's sequences.

Noise: with n evaluations the standard error of a pass rate p is sqrt(p(1-p)/n) (~3 points at
n = 256, p = 0.5); samples of one prompt are correlated, so fewer distinct prompts means more noise.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from scalerl.env.contracts.records import ProblemRecord
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.engines.base import GenerationEngine, GenerationRequest, SamplingParams
from scalerl.trainer.engines.factory import build_torch_engine
from scalerl.trainer.rollout.problems import PromptCodec
from scalerl.trainer.rollout.worker import verify


def validation_engine(cfg: TrainConfig, runtime: Any) -> GenerationEngine | None:
    """The run's engine as validation's (`engine.name=vllm`: the runtime's side channel), or None: build a
    torch engine (`evaluate` does)."""
    if cfg.engine.name != "vllm":
        return None
    return runtime.side_channel(cfg.engine.max_slots)


def evaluate(model: Any, codec: PromptCodec, holdout: Mapping[str, Sequence[ProblemRecord]], cfg: TrainConfig,
             verifier: Any, *, device: str, policy_version: int, record: Any = None,
             engine: GenerationEngine | None = None) -> dict[str, float]:
    """`heldout/<domain>/pass_rate`, `.../n`, and `.../greedy_pass_rate` when asked. `record(problem, samples,
    texts, verdicts)`, when given, sees every sampled group (`scalerl.trainer.rollout.sample_log`). `engine`, when
    given, is the run's (`validation_engine`; left open); otherwise a torch engine is built and closed."""
    e = cfg.engine
    owned = engine is None
    if engine is None:
        engine = build_torch_engine(e, model, codec.eos_token_id, fp32_head=cfg.optim.fp32_head, device=device,
                                    policy_version=policy_version, seed=policy_version)
    elif engine.policy_version != policy_version:
        raise RuntimeError(f"validation of policy {policy_version} on an engine at version {engine.policy_version}")
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    try:
        for domain, problems in holdout.items():
            n = max(1, math.ceil(cfg.validation.min_evaluations_per_domain / len(problems)))
            sampling = SamplingParams(temperature=e.temperature, max_new_tokens=_budget(cfg),
                                      stop_token_ids=codec.stop_token_ids)
            rate, count = _pass_rate(engine, codec, problems, n, sampling, verifier, record)
            out[f"heldout/{domain}/pass_rate"], out[f"heldout/{domain}/n"] = rate, float(count)
            if cfg.validation.greedy:
                out[f"heldout/{domain}/greedy_pass_rate"], _ = _pass_rate(engine, codec, problems, 1, SamplingParams(
                    top_k=1, max_new_tokens=_budget(cfg), stop_token_ids=codec.stop_token_ids), verifier)
    finally:
        if owned:
            engine.close()
    out["validation_s"] = time.perf_counter() - t0
    return out


def _budget(cfg: TrainConfig) -> int:
    if cfg.length.mode == "interrupt":
        return cfg.length.think_budget_max_tokens + cfg.length.answer_budget_tokens
    return cfg.engine.max_new_tokens


def _pass_rate(engine: GenerationEngine, codec: PromptCodec, problems: Sequence[ProblemRecord], n: int,
               sampling: SamplingParams, verifier: Any, record: Any = None) -> tuple[float, int]:
    """Pass rate over `n` samples of each problem, submitted in waves of at most the engine's slots."""
    slots = engine_slot_count(engine)
    waves = deque((i, min(slots, n - start)) for i in range(len(problems)) for start in range(0, n, slots))
    correct = total = queued = submitted = 0
    pending: set[str] = set()
    while waves or pending:
        while waves and (not pending or queued + waves[0][1] <= slots):
            i, count = waves.popleft()
            rid, submitted = f"{i}:{submitted}", submitted + 1
            engine.submit(GenerationRequest(request_id=rid, prompt_token_ids=codec.encode_problem(problems[i]),
                                            samples_per_prompt=count, sampling=sampling))
            pending.add(rid)
            queued += count
        for group in engine.poll(timeout_s=1.0):
            pending.discard(group.request.request_id)
            queued -= group.request.samples_per_prompt
            problem = problems[int(group.request.request_id.split(":")[0])]
            texts = [codec.decode(s.token_ids) for s in group.samples]
            verdicts = verify(verifier, problem, texts)
            if record is not None:
                record(problem, group.samples, texts, verdicts)
            correct += sum(v.correct for v in verdicts)
            total += len(verdicts)
    return (correct / total if total else 0.0), total


def engine_slot_count(engine: GenerationEngine) -> int:
    """Sequences the engine decodes together (`max_slots` of the torch engine's decoder, of a side channel
    or of the vLLM engine; 64 for an engine that names none)."""
    decoder = getattr(engine, "decoder", None)
    return int(getattr(decoder, "max_slots", 0) or getattr(engine, "max_slots", 0) or 64)
