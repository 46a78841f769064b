"""Problems → prompt token ids for a real chat model, and the prompts too long for the budget.

`render_messages` applies the per-domain template (`prompts.<domain>`, defaults from the domain's spec):
the system message (when set) goes first, and the instruction ("... within \\boxed{}", "... one ```python block") is
appended to the last user message unless the record already carries one (its `marker` is in the text:
`data prepare` writes prompts with the instruction in them, the generators write bare `34+52=`).
`ProblemPrompts` encodes every problem once with the tokenizer's chat template (memoised by prompt id).

`drop_long_prompts` removes the problems whose prompt plus the completion budget (the largest of the
run's own and its curriculum stages') does not fit `engine.max_seq_len`: they are logged and counted
(`data/skipped_long_prompts/<domain>` in the run's first metrics record), never silently truncated. A
domain played as episodes (`TrainConfig.environments`) measures its training problems by the episode's
first observation (`scalerl.trainer.rollout.episodes.opening_ids`; held-out ones stay single-turn).
Not guaranteed: that the template suits every model; override `prompts.*` for models that need another.
"""

from __future__ import annotations

import logging
import threading
from array import array
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from scalerl.env.contracts.config_loader import ConfigError
from scalerl.env.contracts.records import ProblemRecord
from scalerl.trainer.config.data import PromptsConfig
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.core.length_control import output_budget, stage_length
from scalerl.trainer.rollout.episodes import opening_ids
from scalerl.trainer.rollout.problems import DomainPool, PromptCodec

log = logging.getLogger(__name__)


def template_applies(prompts: PromptsConfig, codec: PromptCodec) -> bool:
    if prompts.template == "auto":
        return not codec.is_tiny and bool(getattr(codec.tokenizer, "chat_template", None))
    return prompts.template == "on"


def render_messages(problem: ProblemRecord, prompts: PromptsConfig) -> list[dict[str, str]]:
    """The record's messages with the domain's system message and instruction (see the module docstring)."""
    tpl = prompts.for_domain(problem.domain)
    msgs = [m.model_dump() for m in problem.prompt]
    if tpl.system is not None and not any(m["role"] == "system" for m in msgs):
        msgs.insert(0, {"role": "system", "content": tpl.system})
    users = [i for i, m in enumerate(msgs) if m["role"] == "user"]
    if users and tpl.marker not in msgs[users[-1]]["content"]:
        last = msgs[users[-1]]
        msgs[users[-1]] = {**last, "content": f"{last['content'].rstrip()}\n\n{tpl.instruction}"}
    return msgs


class ProblemPrompts:
    """Prompt token ids per problem (memoised, thread-safe): the template applied when `template_applies`."""

    def __init__(self, codec: PromptCodec, prompts: PromptsConfig) -> None:
        self.codec, self.prompts = codec, prompts
        self.templated = template_applies(prompts, codec)
        self._cache: dict[str, array] = {}  # 4 bytes a token: a list of ints costs ~36 (Polaris-size pools)
        self._lock = threading.Lock()

    def __call__(self, problem: ProblemRecord) -> list[int]:
        with self._lock:
            hit = self._cache.get(problem.prompt_id)
        if hit is None:
            messages = render_messages(problem, self.prompts) if self.templated else problem.prompt
            hit = array("i", self.codec.encode_prompt(messages))
            with self._lock:
                self._cache[problem.prompt_id] = hit
        return list(hit)

    def text(self, problem: ProblemRecord) -> str:
        """The rendered prompt as the model sees it (special tokens included), for logs and dry runs."""
        return self.render(self(problem))

    def render(self, ids: list[int]) -> str:
        """Prompt ids as text, special tokens included."""
        return self.codec.decode(ids) if self.codec.is_tiny else self.codec.tokenizer.decode(ids)


def first_prompt(cfg: TrainConfig, encode: ProblemPrompts) -> Callable[[ProblemRecord], list[int]]:
    """The ids a training problem's first turn is prompted with: its prompt through the run's template, or,
    in a domain played as episodes, its environment's first observation (`opening_ids`)."""
    played = cfg.environment_by_domain()

    def ids(problem: ProblemRecord) -> list[int]:
        env = played.get(problem.domain)
        if env is None:
            return encode(problem)
        return opening_ids(problem, env, encode.codec, cfg.verifier, cfg.episode_limits)

    return ids


def completion_budget(cfg: TrainConfig, codec: PromptCodec | None = None) -> int:
    """Most tokens a completion may take (what the engine checks): thinking budget + interruption phrase +
    answer budget, or `engine.max_new_tokens`; with `curriculum.stages` the largest over the stages and
    the run's own (held-out validation and `scalerl profile` sample with the run's own), so a prompt
    kept fits whichever stage draws it. Without a codec the phrase counts one token per character."""
    return largest_budget(cfg, codec)[0]


def largest_budget(cfg: TrainConfig, codec: PromptCodec | None = None) -> tuple[int, str]:
    """`completion_budget` and where it comes from (`length.*` or `curriculum.stages[i]`), for errors."""
    phrase = cfg.length.interruption_phrase
    n_phrase = len(codec.encode(phrase)) if codec is not None else len(phrase)
    stages = [("length.*", None)] + [(f"curriculum.stages[{i}]", s) for i, s in enumerate(cfg.curriculum.stages)]
    budgets = [(output_budget(*stage_length(cfg.length, cfg.engine.max_new_tokens, s), n_phrase), name)
               for name, s in stages]
    return max(budgets, key=lambda b: b[0])  # the first of equal budgets: the run's own


def drop_long_prompts(pools: Mapping[str, DomainPool], encode: ProblemPrompts, cfg: TrainConfig
                      ) -> tuple[dict[str, DomainPool], dict[str, int]]:
    """Pools without the problems whose prompt does not fit, and the count dropped per domain."""
    budget, source = largest_budget(cfg, encode.codec)
    out, skipped = {}, {}
    played, first = cfg.environment_by_domain(), first_prompt(cfg, encode)
    for dom, pool in pools.items():
        train = [p for p in pool.train if len(first(p)) + budget <= cfg.engine.max_seq_len]
        held = [p for p in pool.holdout if len(encode(p)) + budget <= cfg.engine.max_seq_len]
        skipped[dom] = len(pool.train) + len(pool.holdout) - len(train) - len(held)
        what = f"{played[dom]} episode opening" if dom in played else "prompt"  # held-out ones are prompts
        if skipped[dom]:
            log.warning("%s: %d prompts skipped: %s + %d completion tokens (%s) exceed engine.max_seq_len=%d",
                        dom, skipped[dom], what, budget, source, cfg.engine.max_seq_len)
        if not train or not held:
            raise ConfigError(f"{dom}: every {f'training {what}' if not train else 'held-out prompt'} is longer than "
                             f"engine.max_seq_len={cfg.engine.max_seq_len} minus the completion budget "
                             f"{budget} of {source}; raise engine.max_seq_len or lower the budgets")
        out[dom] = replace(pool, train=train, holdout=held)
    return out, skipped


def prepare_prompts(cfg: TrainConfig, tokenizer: Any, pools: Mapping[str, DomainPool], *, drop: bool = True
                    ) -> tuple[PromptCodec, dict[str, DomainPool], dict[str, int]]:
    """The run's codec (stop ids from the tokenizer and generation config, the template as its problem
    encoder) and the pools without the prompts too long for the budget (unchanged when not `drop`)."""
    from scalerl.trainer.engines.model_loading import stop_token_ids

    codec = PromptCodec(tokenizer, None if cfg.model is None else stop_token_ids(tokenizer, cfg.model))
    encode = ProblemPrompts(codec, cfg.prompts)
    codec.problem_encoder = encode
    if not drop:
        return codec, dict(pools), {}
    kept, skipped = drop_long_prompts(pools, encode, cfg)
    return codec, kept, skipped


def run_tokenizer(cfg: TrainConfig) -> Any:
    """The run's tokenizer without its model: the tiny character tokenizer, or `cfg.model`'s."""
    if cfg.model is None:
        from scalerl.trainer.tiny.model import CharTokenizer

        return CharTokenizer()
    from scalerl.trainer.engines.model_loading import load_tokenizer

    return load_tokenizer(cfg.model)
