"""The built-in tiny model saves as an ordinary Hugging Face folder that loads back identically."""

from __future__ import annotations

import torch
from scalerl.trainer.rollout.problems import PromptCodec
from scalerl.trainer.tiny.model import CharTokenizer, TinyModelConfig, build_tiny_model, render_prompt, save_tiny
from transformers import AutoModelForCausalLM, AutoTokenizer

TEXTS = ["f(1)=3 f(2)=5 f(3)=7 f(x)=", "```python\ndef f(x):\n    return 2*x+1\n```", "\\boxed{12}", "tab\tand é"]


def test_saved_folder_loads_with_auto_classes_and_gives_the_same_logits(tmp_path):
    tok = CharTokenizer()
    model = build_tiny_model(TinyModelConfig(num_layers=2), tok).eval()
    save_tiny(tmp_path, model, tok)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert loaded.config.head_dim == 64 and loaded.config.model_type == "llama"
    ids = torch.tensor([[tok.bos_token_id] + tok.encode(TEXTS[0])])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)


def test_hf_tokenizer_matches_the_in_code_tokenizer(tmp_path):
    tok = CharTokenizer()
    save_tiny(tmp_path, build_tiny_model(TinyModelConfig(num_layers=1), tok), tok)
    hf = AutoTokenizer.from_pretrained(tmp_path)
    for text in TEXTS:
        ids = tok.encode(text)
        assert hf.encode(text, add_special_tokens=False) == ids
        assert hf.decode(ids + [tok.eos_token_id], skip_special_tokens=True) == tok.decode(ids + [tok.eos_token_id])
    assert tok.decode(tok.encode("tab\tand é"), skip_special_tokens=False) == "tab\tand <unk>"


def test_chat_template_renders_the_tiny_prompt_format(tmp_path):
    tok = CharTokenizer()
    save_tiny(tmp_path, build_tiny_model(TinyModelConfig(num_layers=1), tok), tok)
    messages = [{"role": "user", "content": TEXTS[0]}]
    via_hf = PromptCodec(AutoTokenizer.from_pretrained(tmp_path)).encode_prompt(messages)
    assert via_hf == PromptCodec(tok).encode_prompt(messages)
    assert via_hf == [tok.bos_token_id] + tok.encode(render_prompt(messages))
