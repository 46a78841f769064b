"""Two trainer ranks (gloo, FSDP2, real processes) against one rank on the same batches.

The pytest process is rank 0 (as the `scalerl train` process is), rank 1 a child process started by
`RankGroup.start`; the model is a float64 tiny Llama with tied embeddings so that differences are
summation order only. One group serves every test of the module (a rank start costs ~15 s here);
the process group times out after 10 s, so a bug is an error, not a hang.

Tolerance: parameters after 4 AdamW steps within 1e-12 of the one-rank run (float64; measured 2e-18,
1e-16 after a resume), gradient norms to 1e-10 relative (measured 3e-16); the generator's logprobs
within 1e-5 of the trainer's (its LM head runs in float32; measured 2e-8).
"""

from __future__ import annotations

import copy
import time

import pytest
import torch
import torch.distributed as dist
from scalerl.trainer.core.recipe_config import LossConfig, OptimConfig
from scalerl.trainer.core.update import pack_samples
from scalerl.trainer.distributed.leader import RankGroup
from scalerl.trainer.distributed.ranks import RankSpec, free_port

from tests.support.models import tiny_llama

TIMEOUT_S = 10.0
PARAM_TOL = 1e-12
OPTIM = OptimConfig(lr=1e-3, warmup_steps=2, micro_batch_tokens=24, attention_layout="padded")
LOSS = LossConfig()


def float64_llama():
    """The policy architecture of both runs (importable by rank 1: `builder` of the spec)."""
    return tiny_llama(tied=True).double()


def batch(seed: int, n_samples: int):
    """Samples of uneven lengths in groups of 2, off-policy gen logprobs, mixed-sign advantages."""
    g = torch.Generator().manual_seed(seed)
    lens = [(int(torch.randint(2, 6, (1,), generator=g)), int(torch.randint(2, 14, (1,), generator=g)))
            for _ in range(n_samples)]
    prompts = [torch.randint(1, 96, (p,), generator=g).tolist() for p, _ in lens]
    completions = [torch.randint(1, 96, (c,), generator=g).tolist() for _, c in lens]
    gen = [(-3.0 - torch.rand(len(c), generator=g)).tolist() for c in completions]
    masks = [[int(i % 5 != 4) for i in range(len(c))] for c in completions]
    adv = [float(torch.randn(1, generator=g)) for _ in range(n_samples)]
    return pack_samples(prompts, completions, gen, masks, adv, [i // 2 for i in range(n_samples)])


# 7 samples: 2 ranks get unequal token counts and micro-batch counts (padding); 1 sample: rank 1 empty.
BATCHES = [batch(1, 7), batch(2, 8), batch(3, 1), batch(4, 5)]


def params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def spec(world: int) -> RankSpec:
    return RankSpec(rank=0, world_size=world, init_method=f"tcp://127.0.0.1:{free_port()}", backend="gloo",
                    device="cpu", timeout_s=TIMEOUT_S, idle_timeout_s=120, builder=f"{__name__}:float64_llama",
                    optim=OPTIM, loss=LOSS)


def generator_logprobs(weights, prompt: list[int]) -> tuple[list[int], list[float]]:
    """A torch generation engine loaded (as in the loop's push) with `weights`: one sample and its logprobs."""
    from scalerl.trainer.engines.base import GenerationRequest, SamplingParams
    from scalerl.trainer.engines.torch_engine import TorchEngine

    engine = TorchEngine(tiny_llama(tied=True, seed=5), eos_token_id=95, dtype=torch.float64, max_slots=2,
                         max_seq_len=64, seed=3)
    try:
        engine.update_weights(weights, 4)
        engine.submit(GenerationRequest(request_id="r", prompt_token_ids=prompt,
                                        sampling=SamplingParams(max_new_tokens=12)))
        deadline, got = time.monotonic() + 60, []
        while not got and time.monotonic() < deadline:
            got = engine.poll(0.5)
    finally:
        engine.close()
    (sample,) = got[0].samples
    return sample.token_ids, sample.logprobs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The one-rank reference and the two-rank group on the same batches, with resumes both ways."""
    tmp = tmp_path_factory.mktemp("ranks")
    start = float64_llama()
    out: dict = {"ref_norms": [], "group_norms": [], "spread": [], "micro": []}
    ref = RankGroup.single(copy.deepcopy(start), OPTIM, LOSS)
    for b in BATCHES[:3]:
        out["ref_norms"].append(ref.step(b)["grad_norm"])
    ref.save_checkpoint(tmp / "one_rank")
    ref.step(BATCHES[3])
    out["ref_final"] = params(ref.mirror)

    group = RankGroup.start(copy.deepcopy(start), spec(2))
    try:
        for b in BATCHES[:3]:
            m = group.step(b)
            out["group_norms"].append(m["grad_norm"])
            out["spread"].append(m["ranks/grad_norm_spread"])
            out["micro"].append(m["ranks/micro_batches_per_rank"])
        group.save_checkpoint(tmp / "two_ranks")
        group.step(BATCHES[3])
        out["pushed"] = group.gather_weights()
        out["push_stats"] = dict(group.last_push)
        prompt = [7, 8, 9, 10]
        ids, gen_lps = generator_logprobs(out["pushed"], prompt)
        row = torch.tensor(prompt + ids)
        out["gen_vs_trainer"] = (gen_lps, group.logprobs(row, torch.arange(len(row)))[len(prompt):].tolist())

        group.load_checkpoint(tmp / "one_rank")  # 1 -> 2 ranks
        group.step(BATCHES[3])
        out["resumed_1_to_2"] = group.gather_weights()
        out["timeout"] = lonely_collective()
    finally:
        group.close()
    resumed = RankGroup.single(float64_llama(), OPTIM, LOSS)  # 2 -> 1 rank
    resumed.load_checkpoint(tmp / "two_ranks")
    resumed.step(BATCHES[3])
    out["resumed_2_to_1"] = params(resumed.mirror)
    out["hf_keys"] = set(start.state_dict())
    out["shapes"] = {k: tuple(v.shape) for k, v in start.state_dict().items()}
    return out


def lonely_collective() -> tuple[float, str]:
    """Rank 0 enters an all-reduce that rank 1 (waiting for a command) never joins: seconds until it fails."""
    t0 = time.monotonic()
    try:
        dist.all_reduce(torch.ones(1))
    except Exception as exc:  # gloo raises a RuntimeError subclass naming the timeout
        return time.monotonic() - t0, f"{type(exc).__name__}: {exc}"
    return time.monotonic() - t0, "no error"


def test_two_ranks_give_the_one_rank_parameters(runs):
    assert max_diff(runs["pushed"], runs["ref_final"]) < PARAM_TOL


def test_clipped_grad_norm_is_the_one_rank_norm_on_every_rank(runs):
    assert runs["spread"] == [0.0, 0.0, 0.0]
    for a, b in zip(runs["group_norms"], runs["ref_norms"]):
        assert a == pytest.approx(b, rel=1e-10)


def test_uneven_shards_pad_to_the_busiest_rank(runs):
    # 7 samples and 8 samples split unevenly (> 1 micro-batch each); 1 sample leaves rank 1 empty.
    assert runs["micro"][0] > 1 and runs["micro"][2] == 1


def test_pushed_weights_have_the_hf_keys_and_full_shapes(runs):
    pushed = runs["pushed"]
    assert set(pushed) == runs["hf_keys"]
    assert {k: tuple(v.shape) for k, v in pushed.items()} == runs["shapes"]
    assert all(v.device.type == "cpu" and not hasattr(v, "full_tensor") for v in pushed.values())
    assert runs["push_stats"]["push/gather_bytes"] > 0


def test_generator_loaded_with_pushed_weights_gives_the_trainer_logprobs(runs):
    gen, trainer = runs["gen_vs_trainer"]
    assert len(gen) == len(trainer) > 0
    assert max(abs(a - b) for a, b in zip(gen, trainer)) < 1e-5


def test_resume_across_rank_counts_continues_with_equal_parameters(runs):
    assert max_diff(runs["resumed_2_to_1"], runs["ref_final"]) < PARAM_TOL
    assert max_diff(runs["resumed_1_to_2"], runs["ref_final"]) < PARAM_TOL


def test_a_collective_on_one_rank_fails_within_its_timeout(runs):
    seconds, error = runs["timeout"]
    assert error != "no error"
    assert TIMEOUT_S * 0.5 <= seconds <= TIMEOUT_S + 20, error
