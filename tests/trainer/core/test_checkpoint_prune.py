"""`checkpoint.keep_last`: old `step_*` folders go after each save, the newest N and the one `latest` names stay.
Hand-made folders for the pure function; the real checkpoint phase of a tiny CPU run for the wiring."""

from __future__ import annotations

import pytest
from scalerl.env.contracts.config_loader import load_config
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.core.checkpoint import latest_checkpoint, prune_checkpoints
from scalerl.trainer.run.loop import checkpoint
from scalerl.trainer.run.setup import LEDGER, prepare_folder, setup_run


def _folders(root, *names: str) -> None:
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "model.safetensors").write_bytes(b"x")


def test_prune_keeps_the_newest_by_step_and_leaves_other_folders(tmp_path):
    _folders(tmp_path, "step_000100", "step_000025", "step_000050", "step_000075", "~step_000125", "exported")
    (tmp_path / "latest").write_text("step_000100\n")
    gone = prune_checkpoints(tmp_path, 2)
    assert [p.name for p in gone] == ["step_000025", "step_000050"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exported", "latest", "step_000075", "step_000100",
                                                           "~step_000125"]


def test_prune_never_deletes_the_checkpoint_latest_names(tmp_path):
    _folders(tmp_path, "step_000010", "step_000020", "step_000030")
    (tmp_path / "latest").write_text("step_000010\n")  # e.g. a newer save that failed before `latest` moved
    gone = prune_checkpoints(tmp_path, 1)
    assert [p.name for p in gone] == ["step_000020"]
    assert latest_checkpoint(tmp_path).name == "step_000010"


def test_prune_rejects_keeping_nothing(tmp_path):
    with pytest.raises(ValueError, match="keep_last"):
        prune_checkpoints(tmp_path, 0)
    with pytest.raises(ValueError):  # the config refuses it before any run
        load_config(TrainConfig, None, ["checkpoint.keep_last=0"])


def test_checkpoint_phase_prunes_and_resume_reads_the_newest(tmp_path):
    cfg = load_config(TrainConfig, None, ["warm_start.enabled=false", "validation.enabled=false",
                                          "checkpoint.keep_last=2"])
    run = setup_run(cfg, tmp_path)
    try:
        for step in (1, 2, 3):
            run.trainer.step_count = step  # as the update phase advances it
            checkpoint(run)
    finally:
        run.close()
    root = tmp_path / "checkpoints"
    assert sorted(p.name for p in root.glob("step_*")) == ["step_000002", "step_000003"]
    assert latest_checkpoint(root).name == "step_000003" and (root / "step_000003" / LEDGER).is_file()
    assert prepare_folder(None, tmp_path, resume=True) == root / "step_000003"
