"""`scalerl.trainer.run.setup` fail-fast checks: a folder that holds a run, `--resume` without a checkpoint,
and a `--model` that is not here (refused without touching the network)."""

from __future__ import annotations

import socket

import pytest
from scalerl.env.contracts.config_loader import ConfigError, load_config
from scalerl.trainer.config.resolve import check_model_path
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.run.setup import LEDGER, prepare_folder


@pytest.fixture
def cfg() -> TrainConfig:
    return load_config(TrainConfig, None, [])


@pytest.mark.parametrize("existing", ["metrics.jsonl", LEDGER])
def test_a_folder_that_holds_a_run_is_refused_and_names_resume(cfg, tmp_path, existing):
    (tmp_path / existing).write_text("{}\n")
    with pytest.raises(ConfigError, match="--resume") as info:
        prepare_folder(cfg, tmp_path, resume=False)
    assert str(tmp_path) in str(info.value)
    assert not (tmp_path / "config.yaml").exists()
    assert (tmp_path / existing).read_text() == "{}\n"  # nothing of the old run is touched


def test_a_fresh_folder_gets_the_resolved_config(cfg, tmp_path):
    out = tmp_path / "new" / "run"
    assert prepare_folder(cfg, out, resume=False) is None
    assert load_config(TrainConfig, out / "config.yaml", []) == cfg


def test_resume_without_a_checkpoint_is_a_config_error(cfg, tmp_path):
    (tmp_path / "metrics.jsonl").write_text("{}\n")
    (tmp_path / LEDGER).write_bytes(b"live ledger")
    with pytest.raises(ConfigError, match="no checkpoint"):
        prepare_folder(cfg, tmp_path, resume=True)
    assert (tmp_path / LEDGER).read_bytes() == b"live ledger"


@pytest.fixture
def offline(monkeypatch):
    """Offline mode, and any connection attempt an error (recorded)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    attempts = []

    def refuse(self, address):
        attempts.append(address)
        raise OSError("network access in a test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    return attempts


@pytest.mark.parametrize("name", ["missing/folder/of/a/model", "/no/such/model/dir", "no-such-org/no-such-model",
                                  "model.gguf"])
def test_a_model_that_is_not_here_is_refused_without_a_download(offline, tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="--model"):
        check_model_path(name)
    assert offline == []


def test_a_local_model_folder_is_accepted(offline, tmp_path):
    check_model_path(str(tmp_path))
    check_model_path(None)  # the built-in tiny model
    assert offline == []
