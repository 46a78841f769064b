"""`scalerl train --domains code-feedback` on the CPU default with the documented settings (docs/environments.md,
Training): after the episode warm start the tiny model follows the protocol (its episodes end by the
environment, not by the length budget, and it answers the feedback), and, in the slow test, it learns."""

from __future__ import annotations

import json
import math

import pytest
from scalerl.trainer.cli import build_app
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.run.log import read_metrics
from typer.testing import CliRunner

ENV = "episode/code-feedback"
DOCUMENTED = ["--domains", "code-feedback", "episode_limits.brief=true", "episode_limits.max_turns=2",
              "engine.max_seq_len=256", "engine.max_new_tokens=160", "length.mode=none"]
"""The documented spelling (docs/environments.md, Training: the tiny model on code-feedback)."""


def _train(out, *extra: str) -> list[dict]:
    result = CliRunner().invoke(build_app(), ["train", *DOCUMENTED, "--out", str(out), "logging.progress=lines",
                                              *extra])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return read_metrics(out / "metrics.jsonl", "step")


@pytest.mark.slow  # ~2 min idle, 5 min at load 10: out of the default run's budget
@pytest.mark.timeout(900)
def test_after_the_episode_warm_start_the_tiny_model_follows_the_protocol(tmp_path, monkeypatch):
    """A smaller episode warm start than the default's (built here, in an empty cache: about a minute), then
    two RL steps: at most 5 % of the episodes are cut by the budget and a wrong first answer is followed by a
    second one in most of the episodes that got feedback."""
    monkeypatch.setenv("SCALERL_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    # pipeline.k=1: no more than two steps of episodes generated (each opens its own sandbox)
    steps = _train(out, "--max-steps", "2", "validation.enabled=false", "pipeline.prompts_per_step=4", "pipeline.k=1",
                   "warm_start.episodes.steps=80", "warm_start.episodes.max_problems=96")
    episodes = sum(s[f"{ENV}/count"] for s in steps)
    assert episodes == 2 * 4 * 8
    assert max(s[f"{ENV}/cut_rate"] for s in steps) <= 0.05
    assert sum(s[f"{ENV}/feedback_turns_mean"] for s in steps) > 0
    rows = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    fed_back = [r for r in rows if r["details"].get("turns") == 2]
    assert fed_back, "no episode got feedback"
    # the second answer is a program again: the tiny model read the feedback line and answered after it
    assert sum("def " in r["completion"].rsplit("\nA: ", 1)[-1] for r in fed_back) >= 0.8 * len(fed_back)
    assert all(not r["truncated"] for r in fed_back)


def play_heldout(folder, problems, seed: int = 1000) -> list:
    """One brief 2-turn code-feedback episode per held-out problem with the tiny model of `folder`, played by
    the trainer's `EpisodeDriver` on the torch engine at the CPU default's temperature; the outcomes."""
    from scalerl.env.contracts.episodes import EpisodeLimits
    from scalerl.trainer.core.checkpoint import load_model_weights
    from scalerl.trainer.engines.base import GenerationRequest, SamplingParams
    from scalerl.trainer.engines.factory import build_torch_engine
    from scalerl.trainer.rollout.episodes import ENVIRONMENT, EPISODES, PROBLEM, EpisodeDriver
    from scalerl.trainer.rollout.problems import PromptCodec
    from scalerl.trainer.tiny.model import CharTokenizer, build_tiny_model

    cfg = TrainConfig(domains=["code"], engine={"max_seq_len": 256, "max_new_tokens": 160})
    tok = CharTokenizer()
    model = build_tiny_model(cfg.tiny, tok)
    load_model_weights(folder, model)
    codec = PromptCodec(tok)
    engine = build_torch_engine(cfg.engine, model, tok.eos_token_id, fp32_head=True, device="cpu", policy_version=0,
                                seed=seed)
    driver = EpisodeDriver(engine, codec, max_seq_len=256, limits=EpisodeLimits(brief=True, max_turns=2))
    sampling = SamplingParams(temperature=cfg.engine.temperature, max_new_tokens=160,
                              stop_token_ids=[tok.eos_token_id])
    for i, p in enumerate(problems):
        driver.submit(GenerationRequest(request_id=f"h{i}", prompt_token_ids=codec.encode_prompt(p.prompt),
                                        sampling=sampling.model_copy(update={"seed": seed + i}),
                                        metadata={ENVIRONMENT: "code-feedback", PROBLEM: p}))
    groups = []
    try:
        while len(groups) < len(problems):
            groups += driver.poll(0.5)
    finally:
        driver.close()
    return [g.request.metadata[EPISODES][0] for g in groups]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_episode_warm_start_teaches_the_tiny_model_to_use_the_feedback():
    """Held-out problems (never traced), 192 episodes per policy: with the shipped single-turn start a wrong first
    answer is (almost) never fixed after the feedback; with the default episode warm start (built on first use,
    ~5 minutes) at least 15 % are, and the episode reward rises by more than 2 standard errors of the
    difference of the two rewards (from the counts)."""
    from scalerl.trainer.run.data_sources import build_data, warm_start_problems
    from scalerl.trainer.tiny import warm_start as ws
    from scalerl.trainer.tiny.episode_warm_start import episode_warm_start

    cfg = TrainConfig(domains=["code-feedback"], episode_limits={"brief": True, "max_turns": 2},
                      engine={"max_seq_len": 256, "max_new_tokens": 160}, length={"mode": "none"})
    pools = build_data(cfg)
    learned = warm_start_problems(cfg, pools)
    base = ws.warm_start(cfg.tiny, cfg.warm_start, learned)
    tuned = episode_warm_start(base, cfg.tiny, cfg.warm_start, "code-feedback", cfg.episode_limits,
                               pools["code"].train, learned, cfg.verifier)
    heldout = pools["code"].holdout[:192]
    rates = {}
    for name, folder in (("single-turn", base), ("episodes", tuned)):
        outcomes = play_heldout(folder, heldout)
        fed_back = [o for o in outcomes if o.turns == 2]
        rates[name] = (sum(o.verdict.reward for o in outcomes) / len(outcomes),
                       sum(o.verdict.reward for o in fed_back) / max(len(fed_back), 1), len(fed_back))
    (r0, fix0, _), (r1, fix1, n1) = rates["single-turn"], rates["episodes"]
    assert fix0 <= 0.02 and fix1 >= 0.15 and n1 >= 20, rates
    margin = 2 * math.sqrt((r0 * (1 - r0) + r1 * (1 - r1)) / len(heldout))
    assert r1 - r0 > margin, (rates, margin)
