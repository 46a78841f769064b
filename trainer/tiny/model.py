"""The built-in tiny model of the CPU default: a Llama-architecture decoder and a character tokenizer.

Both are built in code (no download). `save_tiny(dir, model, tokenizer)` writes an ordinary Hugging
Face folder (config.json + model.safetensors + tokenizer.json + chat template), so
`transformers.AutoModelForCausalLM`/`AutoTokenizer` and vLLM load it like any hub model.

Guarantees:
- head_dim is 64 by default (vLLM's CPU attention rejects 16; 64 is the size measured to work) and
  never below 32 (validated).
- `CharTokenizer.encode`/`decode` give exactly the ids/text of the saved Hugging Face tokenizer
  (tested): one id per character, `<unk>` for characters outside printable ASCII, `\\n`, `\\t`.
- `render_prompt(messages)` is the prompt format of the tiny model and equals the saved chat template
  applied with `add_generation_prompt=True`.

Not guaranteed: anything about quality; the model starts random and the warm start teaches it the
answer format.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scalerl.trainer.tiny.tiny_config import TinyModelConfig

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
CHARS = ["\n", "\t"] + [chr(i) for i in range(32, 127)]
# The answer marker separates prompt from completion; it is plain text so any tokenizer can carry it.
# In the template it is a Jinja string expression: HF renders templates with trim_blocks, which would
# eat a literal newline right after a block tag.
ANSWER_MARKER = "\nA: "
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] != 'assistant' %}{{ m['content'] }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ '" + ANSWER_MARKER.replace("\n", "\\n") + "' }}{% endif %}"
)


class CharTokenizer:
    """One token per character; ids 0..3 are pad, bos, eos, unk."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {s: i for i, s in enumerate(SPECIALS)}
        for c in CHARS:
            self.vocab[c] = len(self.vocab)
        self.id_to_piece = {i: s for s, i in self.vocab.items()}
        self.pad_token_id, self.bos_token_id = self.vocab[PAD], self.vocab[BOS]
        self.eos_token_id, self.unk_token_id = self.vocab[EOS], self.vocab[UNK]

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        return [self.vocab.get(c, self.unk_token_id) for c in text]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        special = {self.pad_token_id, self.bos_token_id, self.eos_token_id, self.unk_token_id}
        pieces = [self.id_to_piece.get(int(i), UNK) for i in ids if not (skip_special_tokens and int(i) in special)]
        return "".join(pieces)

    def to_hf(self) -> Any:
        """The equivalent `transformers` fast tokenizer (for saving and for vLLM)."""
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast

        tok = Tokenizer(models.WordLevel(dict(self.vocab), unk_token=UNK))
        # Every character is its own pre-token; Fuse joins pieces back without separators.
        tok.pre_tokenizer = pre_tokenizers.Split(Regex("[\\s\\S]"), behavior="isolated")
        tok.decoder = decoders.Fuse()
        hf = PreTrainedTokenizerFast(
            tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD, unk_token=UNK
        )
        hf.chat_template = CHAT_TEMPLATE
        return hf


def render_prompt(messages: Sequence[Any]) -> str:
    """Prompt text of the tiny model (without the bos token): user/system contents, then the marker."""
    parts = []
    for m in messages:
        role = m["role"] if isinstance(m, dict) else m.role
        content = m["content"] if isinstance(m, dict) else m.content
        if role != "assistant":
            parts.append(content)
    return "".join(parts) + ANSWER_MARKER


def build_tiny_model(cfg: TinyModelConfig | None = None, tokenizer: CharTokenizer | None = None) -> Any:
    """A freshly initialised `transformers.LlamaForCausalLM` of the given size (fp32)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = cfg or TinyModelConfig()
    tok = tokenizer or CharTokenizer()
    hf_cfg = LlamaConfig(
        vocab_size=tok.vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_heads,
        head_dim=cfg.head_dim, max_position_embeddings=cfg.max_position_embeddings, rms_norm_eps=1e-5,
        rope_theta=cfg.rope_theta, tie_word_embeddings=False, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, attention_bias=False,
    )
    torch.manual_seed(cfg.seed)
    model = LlamaForCausalLM(hf_cfg)
    return model.float()


def save_tiny(path: str | Path, model: Any, tokenizer: CharTokenizer) -> Path:
    """Write a Hugging Face folder (safetensors weights, config, tokenizer, chat template)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.to_hf().save_pretrained(path)
    return path
