"""`scalerl.trainer.tiny.warm_start`: what the cache key depends on, and reuse of a cached result."""

from __future__ import annotations

import pytest
import torch
from scalerl.env.sources.generators import generate
from scalerl.trainer.tiny import warm_start as ws_module
from scalerl.trainer.tiny.model import CharTokenizer, build_tiny_model
from scalerl.trainer.tiny.tiny_config import TinyModelConfig, WarmStartConfig
from scalerl.trainer.tiny.warm_start import cache_key, warm_start

from tests.support.tiny_policy import SMALL_MODEL

WS = WarmStartConfig(steps=2, batch_size=4, batch_size_by_domain={"code": 2})
PROBLEMS = list(generate("math", seed=0, count=6, level=0)) + list(generate("code", seed=0, count=3, level=0))

# One changed value per field: a field added to a config without a line here fails the coverage tests.
MODEL_CHANGES = {"hidden_size": 64, "num_layers": 2, "num_heads": 2, "head_dim": 64, "intermediate_size": 64,
                 "max_position_embeddings": 256, "rope_theta": 500.0, "seed": 1}
WS_CHANGES = {"enabled": False, "domains": ["math"], "steps": 3, "batch_size": 5, "batch_size_by_domain": {"code": 3},
              "lr": 1e-3, "wrong_fraction": 0.2, "domain_weights": {"math": 1.0, "code": 1.0}, "seed": 7}


def key(model=SMALL_MODEL, ws=WS, problems=PROBLEMS) -> str:
    return cache_key(model, ws, problems)


def test_equal_inputs_give_the_same_key():
    copies = [p.model_copy(deep=True) for p in PROBLEMS]
    assert key() == key(TinyModelConfig(**SMALL_MODEL.model_dump()), WarmStartConfig(**WS.model_dump()), copies)


def test_the_cache_switch_does_not_change_the_key():
    assert key(ws=WS.model_copy(update={"cache": False})) == key()


def test_every_model_setting_is_covered():
    assert set(MODEL_CHANGES) == set(TinyModelConfig.model_fields)


def test_every_warm_start_setting_but_cache_is_covered():
    # `episodes` keys the episode phase's own folder (tests/trainer/test_episode_warm_start.py), never this one
    assert set(WS_CHANGES) == set(WarmStartConfig.model_fields) - {"cache", "episodes"}


@pytest.mark.parametrize("field", sorted(MODEL_CHANGES))
def test_a_model_setting_changes_the_key(field):
    changed = SMALL_MODEL.model_copy(update={field: MODEL_CHANGES[field]})
    assert getattr(changed, field) != getattr(SMALL_MODEL, field)
    assert key(model=changed) != key()


@pytest.mark.parametrize("field", sorted(WS_CHANGES))
def test_a_warm_start_setting_changes_the_key(field):
    changed = WS.model_copy(update={field: WS_CHANGES[field]})
    assert getattr(changed, field) != getattr(WS, field)
    assert key(ws=changed) != key()


def with_solution(i: int, solution: str) -> list:
    out = list(PROBLEMS)
    out[i] = out[i].model_copy(update={"metadata": {**out[i].metadata, "solution": solution}})
    return out


@pytest.mark.parametrize("change", ["solution", "added", "removed", "replaced"])
def test_a_problem_change_changes_the_key(change):
    other = list(generate("math", seed=1, count=1, level=0))[0]
    assert other.prompt_id not in {p.prompt_id for p in PROBLEMS}
    problems = {"solution": with_solution(0, "\\boxed{-1}"), "added": [*PROBLEMS, other],
                "removed": PROBLEMS[1:], "replaced": [other, *PROBLEMS[1:]]}[change]
    assert key(problems=problems) != key()


def test_problem_order_is_part_of_the_key():
    """The order of the problems decides the wrong targets and the batches, so the weights depend on it:
    a folder trained from one order must not be reused for another (e.g. `domains: [code, math]` after
    `[math, code]`), or a run would depend on the cache's state."""
    reordered = PROBLEMS[::-1]
    assert key(problems=reordered) != key()
    assert key(problems=list(PROBLEMS)) == key()


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALERL_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_the_result_is_written_under_the_cache_key(cache_dir):
    folder = warm_start(SMALL_MODEL, WS, PROBLEMS)
    assert folder == cache_dir / "warm_start" / key()
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no temporary folder left


def test_a_cached_result_is_reused_without_training(cache_dir, monkeypatch):
    first = warm_start(SMALL_MODEL, WS, PROBLEMS)
    stamp = (first / "model.safetensors").stat().st_mtime_ns

    def no_training(*args, **kwargs):
        raise AssertionError("trained again despite a cached result")

    monkeypatch.setattr(ws_module, "supervised_phase", no_training)
    assert warm_start(SMALL_MODEL, WS, PROBLEMS) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp


def test_cache_off_trains_again(cache_dir, monkeypatch):
    warm_start(SMALL_MODEL, WS, PROBLEMS)
    calls = []
    real = ws_module.supervised_phase
    monkeypatch.setattr(ws_module, "supervised_phase", lambda *a, **k: calls.append(1) or real(*a, **k))
    warm_start(SMALL_MODEL, WS.model_copy(update={"cache": False}), PROBLEMS)
    assert calls == [1]


def test_cache_off_returns_the_freshly_trained_weights(cache_dir, monkeypatch):
    """With `cache: false` a cached folder (here: planted, untrained weights) must not stand in for the
    result this call trained."""
    from safetensors.torch import load_file
    from scalerl.trainer.tiny.model import save_tiny

    tok = CharTokenizer()
    save_tiny(cache_dir / "warm_start" / key(), build_tiny_model(SMALL_MODEL, tok), tok)  # a stale result
    trained = []
    real = ws_module.supervised_phase
    monkeypatch.setattr(ws_module, "supervised_phase",
                        lambda model, *a, **k: trained.append(model) or real(model, *a, **k))
    folder = warm_start(SMALL_MODEL, WS.model_copy(update={"cache": False}), PROBLEMS)
    on_disk = load_file(folder / "model.safetensors")
    fresh = trained[0].state_dict()
    stale = [name for name, t in on_disk.items() if not torch.equal(t, fresh[name])]
    assert stale == [], f"{len(stale)} tensors of the returned folder are not the weights trained by this call"
