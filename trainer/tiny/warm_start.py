"""Warm start of the built-in tiny model: a short supervised phase on generator-made solutions.

Why: RL needs groups with mixed rewards; a random character model never produces a parsable answer.
The phase trains next-token cross-entropy on `prompt → metadata["solution"]` (only the completion
and its eos are in the loss) over the *training* pools (held-out problems are never seen), with a
share `wrong_fraction` of the targets deliberately replaced by the solution of another problem of
the same domain, so the policy starts with a pass rate well above 0 and well below 1, and with a
sampled pass rate well below its greedy one: the gap RL closes first. Each batch holds one domain,
drawn by `domain_weights` (default math 2.8 : code 1 : if 1: level-0 math rows are ~4x shorter, so
cheaper, and need more steps), with `batch_size_by_domain` rows. The problems are those of
`scalerl.trainer.run.data_sources.warm_start_problems`: every domain of `warm_start.domains` (math,
code, if) whatever the run trains, so every subset of them shares one warm start. The defaults
(1200 steps, 40 % wrong) are measured in docs/train.md.

Cache: the result is an ordinary Hugging Face folder under `<cache>/warm_start/<key>/`, where
`<cache>` is `$SCALERL_CACHE_DIR`, else `$XDG_CACHE_HOME/scalerl`, else `~/.cache/scalerl`, and
`<key>` hashes everything that determines the weights (model size, warm-start settings, the problem
ids and solutions). It is written atomically (temp folder + rename). A cached folder is reused.
The built-in CPU default's folder also ships in the repository (`datasets/warm_start/<key>/`, built by
`datasets/warm_start/build.py`; a test fails when it no longer matches the default's key), so a fresh
clone's first run and CI skip the ~7-minute phase (idle 2 cores) for any subset of math, code and if;
it is read, never written. Other keys train here.

Not guaranteed: bitwise-identical weights across machines or torch versions (the key does not
include them); that the pass rates land in a given range for other sizes or levels.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from scalerl.env.contracts.paths import DATASETS
from scalerl.env.contracts.records import ProblemRecord
from scalerl.trainer.tiny.model import CharTokenizer, TinyModelConfig, build_tiny_model, render_prompt, save_tiny
from scalerl.trainer.tiny.tiny_config import WarmStartConfig

log = logging.getLogger(__name__)
RECIPE_VERSION = 2  # bump when the supervised recipe changes: cached folders of older recipes are not reused
SHIPPED = DATASETS / "warm_start"


def cache_root() -> Path:
    if os.environ.get("SCALERL_CACHE_DIR"):
        return Path(os.environ["SCALERL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scalerl"


def cache_key(model_cfg: TinyModelConfig, ws: WarmStartConfig, problems: Sequence[ProblemRecord]) -> str:
    """Identifies the trained weights: every input of `supervised_phase`, problems in the order given
    (the order decides which targets are made wrong and how batches are drawn). The episode phase's settings
    are not: they change its own folder (`scalerl.trainer.tiny.episode_warm_start`), never this one."""
    digest = hashlib.sha256()
    settings = [model_cfg.model_dump(), ws.model_dump(exclude={"cache", "episodes"}), RECIPE_VERSION]
    digest.update(json.dumps(settings, sort_keys=True).encode())
    for p in problems:
        digest.update(f"{p.prompt_id}\x00{p.metadata.get('solution', '')}\x00".encode())
    return digest.hexdigest()[:20]


def warm_start(model_cfg: TinyModelConfig, ws: WarmStartConfig, problems: Sequence[ProblemRecord]) -> Path:
    """The folder of the warm-started tiny model (from the cache, or trained now and cached)."""

    def train() -> tuple[Any, CharTokenizer]:
        tok = CharTokenizer()
        model = build_tiny_model(model_cfg, tok)
        t0 = time.perf_counter()
        loss = supervised_phase(model, tok, problems, ws)
        log.info("warm start: %d steps in %.0f s, final loss %.3f", ws.steps, time.perf_counter() - t0, loss)
        return model, tok

    return cached_folder(cache_key(model_cfg, ws, problems), ws.cache, train)


def cached_folder(key: str, cache: bool, train: Callable[[], tuple[Any, CharTokenizer]]) -> Path:
    """`<cache>/warm_start/<key>` (or the shipped `datasets/warm_start/<key>`) when it exists and `cache`
    is on; else the folder of `train()`'s model, written atomically (temp folder + rename)."""
    folder = cache_root() / "warm_start" / key
    for found in (folder, SHIPPED / key):
        if cache and (found / "config.json").exists():
            log.info("warm start: reusing %s", found)
            return found
    model, tok = train()
    tmp = folder.parent / f"~{folder.name}.{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    save_tiny(tmp, model, tok)
    folder.parent.mkdir(parents=True, exist_ok=True)
    if not folder.exists():
        tmp.rename(folder)
    elif cache:  # another process with the same key finished first: the same weights, keep theirs
        shutil.rmtree(tmp)
    else:  # cache off: this call's weights replace the cached ones
        old = folder.parent / f"~{folder.name}.old.{os.getpid()}"
        folder.rename(old)
        tmp.rename(folder)
        shutil.rmtree(old)
    return folder


Example = tuple[list[int], list[int]]  # (bos + prompt ids, completion ids + eos)


def single_turn_examples(problems: Sequence[ProblemRecord], ws: WarmStartConfig,
                         tok: CharTokenizer) -> dict[str, list[Example]]:
    """Encoded examples per domain, once; `wrong_fraction` of targets are another problem's solution."""
    rng = random.Random(ws.seed)
    solutions: dict[str, list[str]] = {}
    for p in problems:
        solutions.setdefault(p.domain, []).append(p.metadata["solution"])
    out: dict[str, list[Example]] = {}
    for p in problems:
        target = p.metadata["solution"]
        if rng.random() < ws.wrong_fraction:
            target = rng.choice(solutions[p.domain])
        prompt_ids = [tok.bos_token_id] + tok.encode(render_prompt(p.prompt))
        out.setdefault(p.domain, []).append((prompt_ids, tok.encode(target) + [tok.eos_token_id]))
    return out


Row = tuple[list[int], list[int]]  # (token ids, loss mask: 1 where the model's own tokens are)


def as_row(example: Example) -> Row:
    prompt, completion = example
    return prompt + completion, [0] * len(prompt) + [1] * len(completion)


def _batch(tok: CharTokenizer, rows: Sequence[Row]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ids, labels (-100 where the mask is 0 and in the padding) and attention mask."""
    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), tok.pad_token_id)
    labels = torch.full((len(rows), width), -100)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (row, loss_mask) in enumerate(rows):
        n = len(row)
        ids[i, :n], mask[i, :n] = torch.tensor(row), 1
        labels[i, :n] = torch.where(torch.tensor(loss_mask, dtype=torch.bool), torch.tensor(row), -100)
    return ids, labels, mask


def supervised_phase(model: Any, tok: CharTokenizer, problems: Sequence[ProblemRecord], ws: WarmStartConfig) -> float:
    """Train `model` in place for `ws.steps` steps; returns the last loss."""
    if not problems:
        raise ValueError("warm start needs problems with metadata['solution']")
    examples = single_turn_examples(problems, ws, tok)
    domains = sorted(examples)
    weights = [ws.domain_weights.get(d, 1.0) for d in domains]

    def draw(rng: random.Random) -> list[Row]:
        # One domain per batch, drawn by weight (not by pool size): a batch is padded to its longest
        # row, and level-0 math rows are ~4x shorter than code rows, so math batches cost ~4x less.
        domain = rng.choices(domains, weights)[0]
        rows = ws.batch_size_by_domain.get(domain, ws.batch_size)
        return [as_row(rng.choice(examples[domain])) for _ in range(rows)]

    return fit(model, tok, draw, steps=ws.steps, lr=ws.lr, seed=ws.seed + 1)


def fit(model: Any, tok: CharTokenizer, draw: Callable[[random.Random], list[Row]], *, steps: int, lr: float,
        seed: int) -> float:
    """`steps` AdamW steps of masked next-token cross-entropy on `draw(rng)`'s batches (warm-up, then a linear
    decay to a tenth); returns the last loss."""
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 20) * max(0.1, 1 - s / max(steps, 1)))
    model.train()
    loss = torch.tensor(float("nan"))
    for step in range(steps):
        if step % 50 == 0:
            log.info("warm start: step %d/%d, loss %.3f", step, steps, float(loss.detach()))
        ids, labels, mask = _batch(tok, draw(rng))
        logits = model(input_ids=ids, attention_mask=mask).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), labels[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
    model.eval()
    return float(loss.detach())
