"""The per-rank memory plan against PyTorch's FSDP2 tracker without a GPU: rank 0 of 2 and of 8 ranks.

`scalerl.trainer.memory.measure.measure_fsdp_step` shards the project's policy with the trainer's own
`shard_policy` (FSDP2 on every decoder layer, then the root) over a fake process group, and runs the
update step (FP32 head, CISPO, bf16 autocast, AdamW) under fake tensors with `FSDPMemTracker`; one
child process per measurement (`measure_isolated`). Compared per rank: `parameters`, `gradients`,
`optimizer states` (the rank's shards) within 1 %; `FSDP all-gather` against the most gathered bytes
(unsharded parameters + all-gather + reduce-scatter buffers) at any module's snapshot, within 15 %;
the transient sum (autocast copies + activations + logits) against the most activations +
temporaries held at once, within 15 %. Two decoder layers stand for the full depth (as in
test_plan_vs_tracker.py). Default suite: SmolLM2-135M at 2 and 8 ranks (~10 s); the other shapes
are `slow`. Not measured: rank 0's `mirror` (a plain module outside FSDP).
"""

from __future__ import annotations

import pytest
from scalerl.env.contracts.config_loader import load_config
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.memory.measure import measure_isolated
from scalerl.trainer.memory.plan import build_plan
from scalerl.trainer.memory.preflight import shapes_dir

from tests.trainer.memory.test_plan_vs_tracker import SHAPES, TRANSIENT, case_overrides, shape

SAMPLES = 2
SEQ = {"smollm2-135m": 1024, "qwen2.5-1.5b": 512, "deepseek-r1-distill-qwen-1.5b": 512, "qwen2.5-7b": 512}
DEFAULT = "smollm2-135m"


def measured(name: str) -> dict[int, dict[str, int]]:
    """Tracker counts at 2 and 8 ranks (two children at once)."""
    jobs = [{"shape": str(shapes_dir() / name / "config.json"), "layers": 2, "world": world, "samples": SAMPLES,
             "seq_len": SEQ[name], "overrides": case_overrides(SAMPLES, SEQ[name])} for world in (2, 8)]
    return dict(zip((2, 8), measure_isolated(jobs), strict=True))


def rank0_plan(name: str, world: int) -> dict[str, int]:
    cfg = load_config(TrainConfig, None, [*case_overrides(SAMPLES, SEQ[name]), f"trainer_ranks.count={world}",
                                          "engine.device=cuda", "validation.enabled=false"])
    plan = build_plan(shape(name, layers=2), cfg.plan_inputs())
    dev = plan.devices()[0]
    terms = {t.name: t.bytes for t in plan.terms if t.device == dev}
    terms["transient"] = sum(terms[t] for t in TRANSIENT)
    return terms


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n == DEFAULT else pytest.mark.slow) for n in SHAPES])
def test_per_rank_terms_match_the_fsdp2_tracker(name):
    for world, got in measured(name).items():
        plan = rank0_plan(name, world)
        for term in ("parameters", "gradients", "optimizer states"):
            assert plan[term] == pytest.approx(got[term], rel=0.01), (world, term)
        assert plan["FSDP all-gather"] == pytest.approx(got["gathered"], rel=0.15), (world, plan, got)
        assert plan["transient"] == pytest.approx(got["peak_transient"], rel=0.15), (world, plan, got)
