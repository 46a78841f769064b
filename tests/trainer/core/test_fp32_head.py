"""FP32 LM head: packed logprobs equal per-sequence ones, fp32 beats bf16 against float64, dtypes untouched."""

import copy

import pytest
import torch
from scalerl.trainer.core.fp32_head import resolve_layout, token_logprobs

from tests.support.models import tiny_llama


def hf_reference(model, ids):
    """log p(ids[t] | ids[<t]) from the model's own forward, in float64."""
    logits = model(input_ids=ids[None]).logits[0].double()
    return torch.log_softmax(logits[:-1], -1).gather(-1, ids[1:, None])[:, 0]


@pytest.mark.parametrize("tied", [True, False])
def test_matches_the_hugging_face_forward(tied):
    model = tiny_llama(tied=tied).eval()
    ids = torch.randint(0, 96, (20,))
    with torch.no_grad():
        got = token_logprobs(model, ids)
        ref = hf_reference(model, ids)
    assert got[0].item() == 0.0
    assert torch.allclose(got[1:].double(), ref, atol=1e-5)


@pytest.mark.parametrize("layout", ["packed", "padded"])
def test_packed_sequences_equal_separate_sequences(layout):
    model = tiny_llama().eval()
    seqs = [torch.randint(0, 96, (n,)) for n in (7, 1, 12, 3)]
    positions = torch.cat([torch.arange(len(s)) for s in seqs])
    with torch.no_grad():
        packed = token_logprobs(model, torch.cat(seqs), positions, layout=layout)
        separate = torch.cat([token_logprobs(model, s, layout="packed") for s in seqs])
        via_cu = token_logprobs(
            model, torch.cat(seqs), cu_seqlens=torch.tensor([0, 7, 8, 20, 23]), layout=layout
        )
    assert torch.allclose(packed, separate, atol=1e-5)
    assert torch.equal(packed, via_cu)


def test_auto_layout_is_padded_for_sdpa_and_packed_for_flash_attention():
    model = tiny_llama()
    assert resolve_layout(model, "auto") == "padded"
    model.config._attn_implementation = "flash_attention_2"
    assert resolve_layout(model, "auto") == "packed"
    assert resolve_layout(model, "padded") == "padded"


def test_fp32_head_is_closer_to_float64_than_the_bf16_head():
    bf16 = tiny_llama().to(torch.bfloat16).eval()
    f64 = copy.deepcopy(bf16).to(torch.float64)
    ids = torch.randint(0, 96, (64,))
    with torch.no_grad():
        fp32_err = (
            (token_logprobs(bf16, ids, fp32_head=True).double() - token_logprobs(f64, ids)).abs().mean()
        )
        bf16_err = (
            (token_logprobs(bf16, ids, fp32_head=False).double() - token_logprobs(f64, ids)).abs().mean()
        )
        # The head alone, on the same bf16 hidden states: fp32 is nearly exact, bf16 is not.
        hidden = bf16.model(input_ids=ids[None]).last_hidden_state[0, :-1]
        ref = torch.log_softmax(hidden.double() @ bf16.lm_head.weight.double().T, -1).gather(
            -1, ids[1:, None]
        )[:, 0]
        head32 = (token_logprobs(bf16, ids, fp32_head=True)[1:].double() - ref).abs().max()
        head16 = (token_logprobs(bf16, ids, fp32_head=False)[1:].double() - ref).abs().max()
    assert fp32_err < bf16_err
    assert head32 < 1e-4 < head16


def test_stored_dtype_unchanged_and_gradients_reach_tied_bf16_weights():
    model = tiny_llama().to(torch.bfloat16)
    ids = torch.randint(0, 96, (10,))
    lp = token_logprobs(model, ids)
    assert lp.dtype == torch.float32
    lp.sum().backward()
    emb = model.get_input_embeddings().weight
    assert emb is model.get_output_embeddings().weight and emb.dtype == torch.bfloat16
    assert emb.grad is not None and emb.grad.dtype == torch.bfloat16
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())


def test_fp32_head_ignores_an_enclosing_bf16_autocast():
    model = tiny_llama().eval()
    ids = torch.randint(0, 96, (16,))
    with torch.no_grad():
        plain = token_logprobs(model, ids)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            hidden_bf16 = token_logprobs(model, ids, fp32_head=True)
            all_bf16 = token_logprobs(model, ids, fp32_head=False)
    assert (hidden_bf16 - plain).abs().max() < (all_bf16 - plain).abs().max()


def test_temperature_divides_the_logits():
    model = tiny_llama().eval()
    ids = torch.randint(0, 96, (12,))
    with torch.no_grad():
        got = token_logprobs(model, ids, temperature=0.7)
        logits = model(input_ids=ids[None]).logits[0].double() / 0.7
    ref = torch.log_softmax(logits[:-1], -1).gather(-1, ids[1:, None])[:, 0]
    assert torch.allclose(got[1:].double(), ref, atol=1e-5)


def test_inconsistent_boundaries_are_rejected():
    model = tiny_llama()
    ids = torch.randint(0, 96, (6,))
    with pytest.raises(ValueError, match="different sequence boundaries"):
        token_logprobs(model, ids, torch.arange(6), cu_seqlens=torch.tensor([0, 3, 6]))
    with pytest.raises(ValueError, match="count 0, 1, 2"):
        token_logprobs(model, ids, torch.tensor([0, 1, 2, 5, 6, 7]))
