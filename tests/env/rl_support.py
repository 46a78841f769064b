"""A tiny policy whose completions are known, and the problems it answers, for the real-library adapter tests.

The model is a Llama whose weights are set, not trained: attention and MLP outputs are zeroed, so the
last hidden state is the embedding of the current token, and the LM head maps each token to the tokens
that may follow it. Each question tag `<qK>` is followed, with probability 1/2 each, by one right and
one wrong answer (each a single vocabulary entry holding the whole completion text), then by `<eos>`.
So every completion TRL or veRL sees is one of the strings in `PROBLEMS`, and its reward is known.
"""

from __future__ import annotations

import importlib
import json
import math
import os
from dataclasses import dataclass
from typing import Any

import pytest
import torch

# Set by `make test-rl`: there, a missing library is an error; elsewhere its modules are skipped (counted).
REQUIRE_ENV = "SCALERL_RL_TESTS"
SPECIALS = ["<pad>", "<eos>", "<unk>"]
SUM_PROGRAM = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
ADD_PROGRAM = "```python\ndef add(a, b):\n    return a + b\n```"
# A stdio spec with `compare`, a functional spec without it: in one Arrow column each gains the other's
# fields as None (`entry_point`, `cases[].args`, `cases[].expected`, `compare`).
STDIO_SPEC = {"kind": "stdio", "compare": "tokens",
              "cases": [{"input": "1 2\n", "output": "3\n"}, {"input": "3 4\n", "output": "7\n"}]}
FUNC_SPEC = {"kind": "functional", "entry_point": "add",
             "cases": [{"args": [1, 2], "expected": 3}, {"args": [2, 5], "expected": 7}]}


@dataclass(frozen=True)
class Problem:
    tag: str                 # the prompt's last token: it decides the completion
    domain: str
    reference: Any           # math answer text, or a code test spec (dict)
    right: str               # a completion that deserves 1.0
    wrong: str               # one that deserves 0.0
    prompt_id: int

    def reference_text(self) -> str:
        return self.reference if isinstance(self.reference, str) else json.dumps(self.reference)


PROBLEMS = [
    Problem("<q0>", "math", "2", "So 1+1 = \\boxed{2}", "So 1+1 = \\boxed{3}", 100),
    Problem("<q1>", "math", "6", "2*3 is \\boxed{6}", "I do not know.", 101),
    Problem("<q2>", "code", STDIO_SPEC, SUM_PROGRAM, "```python\nprint(0)\n```", 102),
    Problem("<q3>", "code", FUNC_SPEC, ADD_PROGRAM, "```python\ndef add(a, b):\n    return a - b\n```", 103),
]
VOCAB = SPECIALS + [p.tag for p in PROBLEMS] + [c for p in PROBLEMS for c in (p.right, p.wrong)] + ["solve"]
EXPECTED_REWARD = {c: r for p in PROBLEMS for c, r in ((p.right, 1.0), (p.wrong, 0.0))}
# The chat template renders message contents only, so a conversational prompt also ends in its tag.
CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% if not loop.last %} {% endif %}{% endfor %}"


def tiny_tokenizer(vocab: list[str] = VOCAB, chat_template: str = CHAT_TEMPLATE):
    """A word-level tokenizer over `vocab`, split on whitespace; completions are single tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel({t: i for i, t in enumerate(vocab)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>",
                                  unk_token="<unk>", clean_up_tokenization_spaces=False)
    tok.chat_template = chat_template
    return tok


def successors(vocab: list[str] = VOCAB, follows: dict[str, list[str]] | None = None) -> dict[int, list[int]]:
    """Token id → the ids that may follow it: `follows` (by text; default: each question tag's two
    answers); every other token is followed by `<eos>`."""
    index = {t: i for i, t in enumerate(vocab)}
    follows = {p.tag: [p.right, p.wrong] for p in PROBLEMS} if follows is None else follows
    nxt = {i: [index["<eos>"]] for i in range(len(vocab))}
    for token, nexts in follows.items():
        nxt[index[token]] = [index[n] for n in nexts]
    return nxt


def tiny_policy(margin: float = 40.0, vocab_list: list[str] = VOCAB, follows: dict[str, list[str]] | None = None):
    """The Llama described in the module docstring over `vocab_list` (each token followed by `follows`,
    as `successors` reads it); `margin` is the logit gap to impossible tokens."""
    from transformers import LlamaConfig, LlamaForCausalLM

    vocab, hidden = len(vocab_list), 32
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
                      tie_word_embeddings=False, pad_token_id=0, eos_token_id=1, bos_token_id=None)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        model.model.embed_tokens.weight.zero_()
        model.model.embed_tokens.weight[:, :vocab].copy_(torch.eye(vocab))
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        head = torch.zeros(vocab, hidden)
        for token, nexts in successors(vocab_list, follows).items():
            for n in nexts:  # the final RMSNorm scales a one-hot state by sqrt(hidden)
                head[n, token] = margin / math.sqrt(hidden)
        model.lm_head.weight.copy_(head)
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = 1
    return model


def doc_block(heading: str, lang: str) -> str:
    """The first ```lang block under `### heading` in docs/server.md: the tests run what the docs show."""
    from tests.support.server_harness import REPO

    section = (REPO / "docs" / "server.md").read_text().split(f"### {heading}", 1)[1].split("\n### ", 1)[0]
    return section.split(f"```{lang}\n", 1)[1].split("```", 1)[0]


def require(module: str) -> None:
    """Import `module` for a real-library test module: an error under `make test-rl`, a skip elsewhere."""
    if os.environ.get(REQUIRE_ENV) == "1":
        importlib.import_module(module)
    else:
        pytest.importorskip(module, reason=f"the {module} adapter tests run in .venv-rl (make test-rl)")


# The adapters against a server that wants a token: they read it from SCALERL_REWARD_TOKEN.
RL_TOKEN = "rl-adapters-score-token-0123456789"


def secured_args(folder) -> tuple[str, str]:
    """`serve` arguments for a server that accepts RL_TOKEN (scope `score`) and nothing else."""
    path = folder / "tokens"
    path.write_text(f"score {RL_TOKEN}\n")
    return "--token-file", str(path)


def dead_url() -> str:
    """A loopback URL nobody listens on: put first in a URL list, the client must fail over from it."""
    from tests.support.server_harness import free_port

    return f"http://127.0.0.1:{free_port()}"
