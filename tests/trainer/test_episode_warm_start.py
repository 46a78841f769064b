"""The tiny model's episode warm start (`scalerl.trainer.tiny.episode_warm_start`): traces are real episodes of
the environment, tokenized as the trainer samples them, with the loss on the model's submissions only; its
settings never change the shipped single-turn folder's key; a short phase writes a loadable folder."""

from __future__ import annotations

from scalerl.env.contracts.episodes import EpisodeLimits, environment
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.rollout.problems import PromptCodec
from scalerl.trainer.run.data_sources import build_data, warm_start_problems
from scalerl.trainer.tiny import warm_start as ws
from scalerl.trainer.tiny.episode_warm_start import episode_key, episode_trace, episode_warm_start, trace_problems
from scalerl.trainer.tiny.model import CharTokenizer
from scalerl.trainer.tiny.tiny_config import WarmStartConfig

BRIEF = EpisodeLimits(brief=True, max_turns=2)


def _code_problems(n: int = 8) -> list:
    cfg = TrainConfig(domains=["code"])
    return build_data(cfg)["code"].train[:n]


def test_a_trace_is_the_real_episode_as_the_trainer_tokenizes_it_with_loss_on_submissions_only():
    first, other = _code_problems(2)
    tok = CharTokenizer()
    wrong = other.metadata["solution"]
    ids, mask = episode_trace("code-feedback", first, wrong, BRIEF, tok)
    # what the environment answers to the wrong submission, played again here
    episode = environment("code-feedback").open(first, BRIEF, None)
    opening = episode.reset()
    feedback = episode.step(wrong)
    episode.close()
    assert not feedback.done, "the wrong submission should get feedback"
    codec = PromptCodec(tok)
    right = first.metadata["solution"]
    expected = (codec.encode_prompt(opening.observation) + tok.encode(wrong) + [tok.eos_token_id]
                + codec.encode_continuation(feedback.observation) + tok.encode(right) + [tok.eos_token_id])
    assert ids == expected
    learned = tok.decode([i for i, m in zip(ids, mask) if m], skip_special_tokens=False)
    assert learned == f"{wrong}<eos>{right}<eos>"  # the environment's text is never in the loss
    assert feedback.observation[0].content in tok.decode(ids)


def test_a_right_first_submission_makes_a_one_turn_trace():
    problem = _code_problems(1)[0]
    tok = CharTokenizer()
    ids, mask = episode_trace("code-feedback", problem, problem.metadata["solution"], BRIEF, tok)
    assert sum(mask) == len(problem.metadata["solution"]) + 1 and ids[-1] == tok.eos_token_id


def test_the_episode_settings_never_change_the_single_turn_key():
    cfg = TrainConfig()
    problems = warm_start_problems(cfg, build_data(cfg))
    changed = cfg.warm_start.model_copy(update={"episodes": cfg.warm_start.episodes.model_copy(update={"steps": 7})})
    assert ws.cache_key(cfg.tiny, changed, problems) == ws.cache_key(cfg.tiny, cfg.warm_start, problems)


def test_a_short_phase_writes_its_own_folder_keyed_by_the_limits(tmp_path, monkeypatch):
    from scalerl.trainer.core.checkpoint import load_model_weights
    from scalerl.trainer.tiny.model import build_tiny_model

    monkeypatch.setenv("SCALERL_CACHE_DIR", str(tmp_path))
    cfg = TrainConfig()
    shipped = next(p for p in ws.SHIPPED.iterdir() if p.is_dir() and not p.name.startswith("_"))
    settings = WarmStartConfig(episodes={"steps": 2, "batch_size": 2, "max_problems": 3})
    problems = _code_problems()
    folder = episode_warm_start(shipped, cfg.tiny, settings, "code-feedback", BRIEF, problems, problems[:4])
    assert folder.parent == tmp_path / "warm_start" and (folder / "config.json").exists()
    load_model_weights(folder, build_tiny_model(cfg.tiny, CharTokenizer()))
    traced = trace_problems("code-feedback", problems, 3)
    assert episode_key(shipped, settings, "code-feedback", BRIEF, traced) == folder.name
    assert episode_key(shipped, settings, "code-feedback", EpisodeLimits(), traced) != folder.name


def test_problems_without_solutions_leave_the_single_turn_start(tmp_path):
    bare = [p.model_copy(update={"metadata": {}}) for p in _code_problems(3)]
    cfg = TrainConfig()
    assert episode_warm_start(tmp_path, cfg.tiny, cfg.warm_start, "code-feedback", BRIEF, bare, bare) == tmp_path
