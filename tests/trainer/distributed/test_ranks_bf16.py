"""Two gloo trainer ranks with `optim.precision=bf16`: FSDP2's mixed-precision policy on the CPU.

The decoder layers are all-gathered and run in bf16 (their weights seen inside a forward are bf16), the
master shards and the pushed weights stay fp32, and the two-rank update stays within bf16 rounding of the
one-rank bf16-autocast update on the same batches.
"""

from __future__ import annotations

import copy

import torch
from scalerl.trainer.core.recipe_config import OptimConfig
from scalerl.trainer.distributed.leader import RankGroup
from scalerl.trainer.distributed.ranks import RankSpec, free_port

from tests.support.models import tiny_llama
from tests.trainer.distributed.test_ranks_equivalence import BATCHES, LOSS, TIMEOUT_S

OPTIM = OptimConfig(lr=1e-3, warmup_steps=2, micro_batch_tokens=24, attention_layout="padded", precision="bf16")
# Adam's first steps move every weight by ~lr whatever the gradient's size, so bf16 noise flips the sign of
# small coordinates: the updates are compared by direction (cosine) and the gradient norms relatively.
MIN_COSINE = 0.95  # measured 0.997
NORM_TOL = 0.05  # measured 6e-3


def float32_llama():
    """The policy architecture (importable by rank 1: `builder` of the spec)."""
    return tiny_llama(tied=True)


def test_two_bf16_ranks_run_layers_in_bf16_and_match_one_rank():
    start = float32_llama()
    ref = RankGroup.single(copy.deepcopy(start), OPTIM, LOSS)
    ref_norms = [ref.step(b)["grad_norm"] for b in BATCHES[:2]]
    spec = RankSpec(rank=0, world_size=2, init_method=f"tcp://127.0.0.1:{free_port()}", backend="gloo",
                    device="cpu", timeout_s=TIMEOUT_S, idle_timeout_s=120,
                    builder=f"{__name__}:float32_llama", optim=OPTIM, loss=LOSS)
    group = RankGroup.start(copy.deepcopy(start), spec)
    seen: list[torch.dtype] = []
    try:
        q_proj = group.trainer.model.model.layers[0].self_attn.q_proj
        hook = q_proj.register_forward_pre_hook(lambda m, _: seen.append(m.weight.dtype))
        metrics = [group.step(b) for b in BATCHES[:2]]
        hook.remove()
        pushed = group.gather_weights()
    finally:
        group.close()
    assert seen and set(seen) == {torch.bfloat16}, seen  # the layer's gathered weight, not an autocast cast
    assert all(torch.isfinite(torch.tensor(m["loss"])) for m in metrics)
    assert {v.dtype for v in pushed.values()} == {torch.float32}
    expected, initial = ref.mirror.state_dict(), start.state_dict()
    two = torch.cat([(pushed[k] - initial[k]).flatten() for k in pushed])
    one = torch.cat([(expected[k] - initial[k]).flatten() for k in pushed])
    cosine = float(torch.nn.functional.cosine_similarity(two, one, dim=0))
    norm_gap = max(abs(m["grad_norm"] - r) / r for m, r in zip(metrics, ref_norms))
    print(f"update cosine 2 ranks vs 1 rank: {cosine:.4f}; grad-norm gap {norm_gap:.2e}")
    assert cosine > MIN_COSINE, cosine
    assert norm_gap < NORM_TOL, norm_gap
