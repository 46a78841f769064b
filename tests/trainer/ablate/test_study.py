"""Resuming a study: which run folders count as finished, resumable or new, and planned-run conflicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scalerl.env.contracts.config_loader import ConfigError
from scalerl.trainer.ablate.study import (
    MANIFEST,
    StudySpec,
    merge_previous,
    plan,
    prepare_folder,
    run_state,
    write_manifest,
)


def test_run_states_and_folder_preparation(tmp_path: Path) -> None:
    done, killed, early = tmp_path / "done", tmp_path / "killed", tmp_path / "early"
    (done / "checkpoints").mkdir(parents=True)
    (done / "summary.json").write_text("{}")
    (killed / "checkpoints").mkdir(parents=True)
    (killed / "checkpoints" / "latest").write_text("step_000050")
    (killed / "metrics.jsonl").write_text("{}\n")
    early.mkdir()
    (early / "metrics.jsonl").write_text("{}\n")
    assert [run_state(p) for p in (done, killed, early, tmp_path / "none")] == ["finished", "resumable", "new", "new"]
    assert prepare_folder(killed) is True and (killed / "metrics.jsonl").exists()  # resumes: nothing removed
    assert prepare_folder(early) is False and not early.exists()  # no checkpoint: started again from scratch


def test_a_finished_run_planned_differently_is_refused(tmp_path: Path) -> None:
    spec = StudySpec(variants=["loo-dapo"], seeds=1, budget=10, out=str(tmp_path))
    manifest = plan(spec)
    for run in manifest.runs:
        (tmp_path / run.folder).mkdir(parents=True)
        (tmp_path / run.folder / "summary.json").write_text("{}")
    write_manifest(manifest, tmp_path)
    assert {r["status"] for r in json.loads((tmp_path / MANIFEST).read_text())["runs"]} == {"finished"}
    merge_previous(plan(spec), tmp_path)  # same plan: fine
    more_seeds = spec.model_copy(update={"seeds": 2})
    assert len(merge_previous(plan(more_seeds), tmp_path).runs) == 4  # a larger study extends this one
    with pytest.raises(ConfigError, match="finished with overrides"):
        merge_previous(plan(spec.model_copy(update={"budget": 20})), tmp_path)
