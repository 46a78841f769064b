"""Variant registry and study plan: what each variant changes, user variants, seeds and budget keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from scalerl.env.contracts.config_loader import ConfigError
from scalerl.trainer.ablate.study import StudySpec, build_run_config, plan
from scalerl.trainer.ablate.variants import BASELINE, PAPER_VARIANTS, load_user_variants, overrides_for, resolve

from tests.support.config_diff import changed_keys

EXPECTED = {
    "loo-dapo": {"loss.name"},
    "loo-savg": {"loss.aggregation"},
    "loo-plan": {"advantages.normalization"},
    "loo-batch": {"curriculum.zero_variance.mode", "advantages.std_includes_zero_variance"},
    "loo-fp32": {"optim.fp32_head"},
    "loo-lp": {"length.mode"},
    "loo-8op": {"pipeline.mode"},
}


def test_each_paper_variant_changes_exactly_its_component() -> None:
    assert set(PAPER_VARIANTS) == set(EXPECTED)
    spec = StudySpec(variants=[BASELINE], budget=1, out="x")
    base = build_run_config(spec, [])
    for variant in resolve(PAPER_VARIANTS):
        cfg = build_run_config(spec, overrides_for(variant))
        changed = changed_keys(base.model_dump(mode="json"), cfg.model_dump(mode="json"))
        assert changed == EXPECTED.get(variant.name, set()), variant.name


def test_length_penalty_budget_follows_the_output_budget() -> None:
    (_, lp) = resolve(["loo-lp"])
    cfg = build_run_config(StudySpec(variants=[BASELINE], budget=1, out="x"),
                           ["engine.max_new_tokens=140", *overrides_for(lp)])
    assert cfg.length.mode == "penalty"
    assert cfg.length.penalty_budget(cfg.engine.max_new_tokens) == (140, 28)


def test_resolve_puts_baseline_first_and_rejects_unknown_names() -> None:
    assert [v.name for v in resolve(["loo-dapo"])] == [BASELINE, "loo-dapo"]
    with pytest.raises(ConfigError, match="unknown variant"):
        resolve(["loo-nope"])
    with pytest.raises(ConfigError, match="repeat"):
        resolve(["loo-dapo", "loo-dapo"])


def test_user_variants_from_yaml(tmp_path: Path) -> None:
    good = tmp_path / "v.yaml"
    good.write_text("variants:\n  k4:\n    description: PipelineRL-4\n    overrides: [pipeline.k=4]\n")
    user = load_user_variants(good)
    assert [v.name for v in resolve(["k4"], user)] == [BASELINE, "k4"]
    assert overrides_for(user["k4"]) == ["pipeline.k=4"]
    clash = tmp_path / "clash.yaml"
    clash.write_text("variants:\n  loo-dapo:\n    overrides: [pipeline.k=4]\n")
    with pytest.raises(ConfigError, match="built-in"):
        load_user_variants(clash)
    empty = tmp_path / "empty.yaml"
    empty.write_text("variants:\n  x:\n    overrides: []\n")
    with pytest.raises(ConfigError):
        load_user_variants(empty)


def test_plan_varies_sampling_seed_only_and_fixes_the_budget(tmp_path: Path) -> None:
    spec = StudySpec(variants=["loo-dapo"], seeds=2, budget=42.0, out=str(tmp_path),
                     overrides=["loss.name=grpo"])
    manifest = plan(spec)
    runs = [(r.variant, r.seed) for r in manifest.runs]
    assert runs == [(BASELINE, 0), ("loo-dapo", 0), (BASELINE, 1), ("loo-dapo", 1)]  # seed-major
    cfgs = [build_run_config(spec, r.overrides) for r in manifest.runs]
    assert [c.pipeline.seed for c in cfgs] == [0, 0, 1, 1]
    assert all(c.pipeline.budget == 42.0 and c.pipeline.budget_axis == "device_s" for c in cfgs)
    assert all(c.pipeline.max_time_s is None for c in cfgs)
    # the held-out set and the starting policy (warm start) are the same in every run
    starts = {(c.data.model_dump_json(), c.warm_start.model_dump_json(), c.tiny.model_dump_json()) for c in cfgs}
    assert len(starts) == 1
    assert cfgs[0].loss.name == "grpo" and cfgs[1].loss.name == "dapo"  # the variant wins over a shared override
    with pytest.raises(ConfigError):
        plan(StudySpec(variants=["baseline"], budget=1, out=str(tmp_path), overrides=["pipeline.nope=1"]))
