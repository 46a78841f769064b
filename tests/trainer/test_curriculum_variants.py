"""Every curriculum strategy is a `scalerl ablate` variant that changes only `curriculum.*` settings."""

from __future__ import annotations

from scalerl.trainer.ablate.study import StudySpec, build_run_config
from scalerl.trainer.ablate.variants import BASELINE, CURRICULUM_VARIANTS, PAPER_VARIANTS, overrides_for, resolve

from tests.support.config_diff import changed_keys


def test_curriculum_variants_resolve_and_change_only_the_curriculum() -> None:
    assert {"cur-refill", "cur-learnability", "cur-greso"} <= set(CURRICULUM_VARIANTS)
    assert not set(CURRICULUM_VARIANTS) & set(PAPER_VARIANTS)
    spec = StudySpec(variants=[BASELINE], budget=1, out="x")
    base = build_run_config(spec, []).model_dump(mode="json")
    for variant in resolve(CURRICULUM_VARIANTS)[1:]:
        cfg = build_run_config(spec, overrides_for(variant))
        changed = changed_keys(base, cfg.model_dump(mode="json"))
        assert changed and all(k.startswith("curriculum.") for k in changed), (variant.name, changed)
        assert cfg.curriculum.sampler_active or cfg.curriculum.zero_variance.mode != "shrink", variant.name
