"""Warm start of the tiny model for a run that plays an environment: supervised traces of real episodes.

Why: the single-turn warm start teaches the answer format, not the protocol; a character model that has
never seen an observation after its answer does not know that a second answer follows. For the first
`max_problems` problems of the environment domain's training pool, one trace each is made by playing the
REAL environment (`EnvironmentSpec.open`, reset, step) with a scripted policy: the first submission is
the problem's solution, or (a share `wrong_fraction`) another problem's; when the environment answers
(its own feedback text, never made up here), the second submission is the solution. A trace is the
episode's token ids as the trainer's `EpisodeDriver` builds them for the tiny model (bos, the opening and
the answer marker; each submission and its eos; each observation and the next marker) with the loss
only on the submissions. Training starts from the single-turn warm start's weights and mixes in its
examples (`single_turn_share` of the batches) so the domains it learned are kept.

Cache: like the single-turn warm start (`scalerl.trainer.tiny.warm_start.cached_folder`), keyed by the
single-turn folder's name, these settings, the environment, its limits and the traces' problems; built on
first use, never shipped: for the CPU default's code-feedback run with `episode_limits.brief`, 512
traces in 85 s and 300 steps in 240 s on 2 cores shared with other jobs (load ~4.5).

Not guaranteed: that the traces show every feedback form (a wrong submission that passes the visible
tests ends its episode at once; its trace is one turn); bitwise-identical weights across machines.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scalerl.env.contracts.episodes import EpisodeLimits, EpisodeMessage, environment
from scalerl.env.contracts.records import ProblemRecord
from scalerl.trainer.tiny.model import CharTokenizer, TinyModelConfig, build_tiny_model, render_prompt
from scalerl.trainer.tiny.tiny_config import WarmStartConfig
from scalerl.trainer.tiny.warm_start import Row, as_row, cached_folder, fit, single_turn_examples

log = logging.getLogger(__name__)
RECIPE_VERSION = 1  # bump when the traces or the recipe change: cached folders of older recipes are not reused


def trace_problems(env: str, problems: Sequence[ProblemRecord], max_problems: int) -> list[ProblemRecord]:
    """The problems traced: the first `max_problems` of the environment's domain that carry a solution."""
    domain = environment(env).domain
    return [p for p in problems if p.domain == domain and p.metadata.get("solution")][:max_problems]


def episode_key(base: Path, ws: WarmStartConfig, env: str, limits: EpisodeLimits,
                problems: Sequence[ProblemRecord]) -> str:
    digest = hashlib.sha256()
    settings = [base.name, ws.episodes.model_dump(), env, limits.model_dump(mode="json"), RECIPE_VERSION]
    digest.update(json.dumps(settings, sort_keys=True).encode())
    for p in problems:
        digest.update(f"{p.prompt_id}\x00{p.metadata['solution']}\x00".encode())
    return "episodes-" + digest.hexdigest()[:20]


def episode_trace(env: str, problem: ProblemRecord, first: str, limits: EpisodeLimits, tok: CharTokenizer,
                  verifier_config: Any = None) -> Row:
    """One scripted episode of the real environment: `first`, then (if the environment answers) the solution;
    ids and loss mask as the trainer samples them for the tiny model."""
    spec = environment(env)
    episode = spec.open(problem, limits, verifier_config)
    try:
        opening = episode.reset()
        ids = [tok.bos_token_id] + tok.encode(render_prompt(opening.observation))
        mask = [0] * len(ids)
        for action in (first, problem.metadata["solution"]):
            turn = tok.encode(action) + [tok.eos_token_id]
            ids, mask = ids + turn, mask + [1] * len(turn)
            step = episode.step(action)
            if step.done:
                break
            observed = tok.encode(render_prompt([EpisodeMessage.model_validate(m) for m in step.observation]))
            ids, mask = ids + observed, mask + [0] * len(observed)
        return ids, mask
    finally:
        episode.close()


def make_traces(env: str, problems: Sequence[ProblemRecord], ws: WarmStartConfig, limits: EpisodeLimits,
                tok: CharTokenizer, verifier_config: Any = None) -> list[Row]:
    rng = random.Random(ws.episodes.seed)
    solutions = [p.metadata["solution"] for p in problems]
    rows = []
    for p in problems:
        wrong = rng.random() < ws.episodes.wrong_fraction
        first = rng.choice([s for s in solutions if s != p.metadata["solution"]] or solutions) if wrong \
            else p.metadata["solution"]
        rows.append(episode_trace(env, p, first, limits, tok, verifier_config))
    return rows


def episode_warm_start(base: Path, model_cfg: TinyModelConfig, ws: WarmStartConfig, env: str, limits: EpisodeLimits,
                       problems: Sequence[ProblemRecord], single_turn: Sequence[ProblemRecord],
                       verifier_config: Any = None) -> Path:
    """The folder of the tiny model warm-started on `env`'s traces from `base` (the single-turn warm start's
    folder, trained on `single_turn`), from the cache or trained now and cached; `base` itself when no
    problem of the environment's domain carries a solution to trace."""
    traced = trace_problems(env, problems, ws.episodes.max_problems)
    if not traced:  # problems from files without solutions: nothing to trace, the run starts from `base`
        log.warning("episode warm start skipped: no %s training problem carries metadata['solution']", env)
        return base

    def train() -> tuple[Any, CharTokenizer]:
        from scalerl.trainer.core.checkpoint import load_model_weights

        t0 = time.perf_counter()
        tok = CharTokenizer()
        traces = make_traces(env, traced, ws, limits, tok, verifier_config)
        examples = [as_row(e) for rows in single_turn_examples(single_turn, ws, tok).values() for e in rows]
        model = build_tiny_model(model_cfg, tok)
        load_model_weights(base, model)
        made = time.perf_counter() - t0
        episodes = ws.episodes

        def draw(rng: random.Random) -> list[Row]:
            pool = examples if examples and rng.random() < episodes.single_turn_share else traces
            return [rng.choice(pool) for _ in range(episodes.batch_size)]

        loss = fit(model, tok, draw, steps=episodes.steps, lr=episodes.lr, seed=episodes.seed + 1)
        log.info("episode warm start: %d traces in %.0f s, %d steps in %.0f s, final loss %.3f", len(traces), made,
                 episodes.steps, time.perf_counter() - t0 - made, loss)
        return model, tok

    return cached_folder(episode_key(base, ws, env, limits, traced), ws.cache, train)
