"""Every shipped configuration preflighted: each preset and each `examples/*.yaml` with the model shape
and the GPU memory it documents either fits its memory plan, or is documented not to fit and the
error names the largest term. A new example without an entry here fails `test_every_example_is_listed`."""

from __future__ import annotations

from pathlib import Path

import pytest
from scalerl.env.contracts.config_loader import load_config
from scalerl.env.contracts.paths import REPO
from scalerl.trainer.config.presets import PRESETS, preset_values
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.memory.plan import GIB, PlanDoesNotFit, build_plan, check_fits
from scalerl.trainer.memory.preflight import shapes_dir
from scalerl.trainer.memory.shapes import ModelShape

EXAMPLES = REPO / "examples"
PAPER_NEEDS = ["optim.activation_checkpointing=true", "engine.kv_cache_gib=2"]
"""What the paper preset sets so that it fits one 80 GB GPU with the torch engine."""

# name: (preset, example file or None, overrides, shape, GiB per device, fits, largest term when not)
TARGETS = {
    "tiny-cpu": ("tiny-cpu", None, ["engine.device=cpu"], None, 8, True, None),
    "small-cpu": ("small-cpu", None, ["engine.device=cpu"], "smollm2-135m", 16, True, None),
    "study": ("study", None, ["engine.device=cpu"], None, 8, True, None),
    "paper": ("paper", None, [], "qwen2.5-1.5b", 80, True, None),
    "paper without PAPER_NEEDS": ("paper", None, ["optim.activation_checkpointing=false", "engine.kv_cache_gib=null"],
                                  "qwen2.5-1.5b", 80, False, "validation engine"),
    "paper, 7B on 24 GiB": ("paper", None, PAPER_NEEDS, "qwen2.5-7b", 24, False, "optimizer states"),
    "polaris_deepcoder_1.5b.yaml": ("paper", "polaris_deepcoder_1.5b.yaml", ["engine.name=vllm"],
                                    "deepseek-r1-distill-qwen-1.5b", 80, True, None),
    "multinode.yaml": (None, "multinode.yaml", [], "qwen2.5-7b", 80, False, "activations"),
}


def plan_of(target: str):
    preset, example, overrides, shape_name, gib, _, _ = TARGETS[target]
    cfg = load_config(TrainConfig, EXAMPLES / example if example else None, overrides, base=preset_values(preset))
    if shape_name is None:  # the tiny model: its parameters from the built model (no config.json)
        return None, cfg
    shape = ModelShape.from_folder(shapes_dir() / shape_name)
    return build_plan(shape, cfg.plan_inputs(), device_memory=int(gib * GIB)), cfg


def test_every_example_and_preset_is_listed():
    listed = {t[1] for t in TARGETS.values()} | {t[0] for t in TARGETS.values()}
    assert {p.name for p in EXAMPLES.glob("*.yaml")} <= listed
    assert set(PRESETS) <= listed


@pytest.mark.parametrize("target", [t for t, v in TARGETS.items() if v[5] and v[3] is not None])
def test_fits(target):
    plan, _ = plan_of(target)
    check_fits(plan)


@pytest.mark.parametrize("target", [t for t, v in TARGETS.items() if not v[5]])
def test_does_not_fit_and_says_why(target):
    plan, _ = plan_of(target)
    with pytest.raises(PlanDoesNotFit) as err:
        check_fits(plan)
    message = str(err.value)
    assert f"largest term: {TARGETS[target][6]}" in message and "to shrink" in message


def test_documented_not_fitting_examples_say_so():
    for target, (_, example, *_rest, fits, _term) in TARGETS.items():
        if example and not fits:
            assert "does NOT fit" in (EXAMPLES / example).read_text(), target


def test_tiny_default_is_small():
    """The CPU default has no config.json; its model is built in code: a few MB whatever the plan."""
    from scalerl.trainer.tiny.model import CharTokenizer, build_tiny_model

    _, cfg = plan_of("tiny-cpu")
    model = build_tiny_model(cfg.tiny, CharTokenizer())
    assert sum(p.numel() for p in model.parameters()) * 16 < 64 * (1 << 20)


def test_paper_preset_plan_is_quick(tmp_path: Path):
    """A folder that holds only a config.json is enough for a plan (no weights, no tokenizer)."""
    import shutil
    import time

    from scalerl.trainer.memory.preflight import plan_report

    shutil.copy(shapes_dir() / "qwen2.5-1.5b" / "config.json", tmp_path / "config.json")
    t0 = time.perf_counter()
    cfg = load_config(TrainConfig, None, [f"model={tmp_path}", "engine.device_memory_gib=80", *PAPER_NEEDS],
                      base=preset_values("paper"))
    report = plan_report(cfg.plan_inputs())
    assert "cuda:0:" in report and "fits" in report and "DOES NOT FIT" not in report
    assert time.perf_counter() - t0 < 60
