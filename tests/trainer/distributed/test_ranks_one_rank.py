"""One trainer rank takes the N-rank path (cut, shard, accumulate, merge) and is bit-identical to the
update step written out by hand; how batches are cut for N ranks."""

from __future__ import annotations

import copy

import pytest
import torch
from scalerl.trainer.core.fp32_head import token_logprobs
from scalerl.trainer.core.losses import aggregation_weights, policy_loss
from scalerl.trainer.core.update import PolicyTrainer, merge_metrics, micro_batch_bounds
from scalerl.trainer.distributed.leader import RankGroup
from scalerl.trainer.distributed.sharding import cut_batch, cut_points

from tests.support.models import tiny_llama
from tests.trainer.distributed.test_ranks_equivalence import BATCHES, LOSS, OPTIM, spec


def plain_step(trainer: PolicyTrainer, batch) -> dict[str, float]:
    """The update step written out: the functional FP32-head logprobs on the model, whole-batch weights
    sliced per micro-batch, then the trainer's optimizer step."""
    weights = aggregation_weights(batch.sample_ids, batch.group_ids, batch.loss_mask, LOSS.aggregation)
    parts = []
    for start, stop in micro_batch_bounds(batch.cu_seqlens, OPTIM.micro_batch_tokens):
        mb = batch.select_samples(start, stop)
        lo, hi = int(batch.cu_seqlens[start]), int(batch.cu_seqlens[stop])
        logprobs = token_logprobs(trainer.model, mb.input_ids, mb.position_ids, layout=OPTIM.attention_layout)
        loss, metrics = policy_loss(logprobs, mb.gen_logprobs, mb.advantages, mb.sample_ids, mb.group_ids,
                                    mb.loss_mask, LOSS, token_weights=weights[lo:hi])
        loss.backward()
        parts.append(metrics)
    merged = merge_metrics(parts)
    merged["micro_batches"] = float(len(parts))
    return {**merged, **trainer.optimizer_step()}


def test_one_rank_group_is_bit_identical_to_the_plain_update():
    start = tiny_llama(tied=False)  # float32, as the CPU default
    plain = PolicyTrainer(copy.deepcopy(start), OPTIM, LOSS)
    group = RankGroup.start(copy.deepcopy(start), spec(1))
    assert group.world_size == 1 and group.trainer.model is group.mirror
    for b in BATCHES:
        expected, got = plain_step(plain, b), group.step(b)
        assert got == expected
    for (name, a), (_, b) in zip(plain.model.state_dict().items(), group.gather_weights().items()):
        assert torch.equal(a, b), name
    group.close()


def test_cuts_fall_on_sample_boundaries_balanced_by_tokens():
    cu = torch.tensor([0, 10, 20, 30, 40, 50, 60])
    assert cut_points(cu, 2) == [(0, 3), (3, 6)]
    assert cut_points(cu, 3) == [(0, 2), (2, 4), (4, 6)]
    assert cut_points(torch.tensor([0, 50, 51, 52]), 2) == [(0, 1), (1, 3)]  # one long sample alone
    assert cut_points(torch.tensor([0, 7]), 3) == [(0, 0), (0, 1), (1, 1)]  # fewer samples than ranks
    assert cut_points(cu, 1) == [(0, 6)]
    with pytest.raises(ValueError):
        cut_points(cu, 0)


def test_shards_carry_whole_batch_weights_and_one_micro_batch_count():
    batch = BATCHES[0]
    weights = aggregation_weights(batch.sample_ids, batch.group_ids, batch.loss_mask, "prompt")
    shards = cut_batch(batch, "prompt", 2, OPTIM.micro_batch_tokens)
    assert sum(s.batch.num_tokens for s in shards) == batch.num_tokens
    assert torch.equal(torch.cat([s.token_weights for s in shards]), weights)
    assert float(sum(s.token_weights.sum() for s in shards)) == pytest.approx(1.0)
    assert len({s.micro_batches for s in shards}) == 1 and all(s.loss_scale == 2.0 for s in shards)
    counts = [len(micro_batch_bounds(s.batch.cu_seqlens, OPTIM.micro_batch_tokens)) for s in shards]
    assert shards[0].micro_batches == max(counts)
