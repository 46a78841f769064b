"""`scalerl-env doctor` reports the host's sandbox layers and a real smoke run."""

from __future__ import annotations

import json

from scalerl.env.cli import build_app
from typer.testing import CliRunner


def test_doctor_json_reports_layers_level_and_smoke_run() -> None:
    result = CliRunner().invoke(build_app(), ["doctor", "--no-math", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["sandbox"]["level"] == "strict"
    assert report["sandbox"]["layers"]["seccomp"] is True
    assert report["code_smoke"] == {**report["code_smoke"], "ok": True, "statuses": ["correct", "wrong"]}


def test_doctor_text_lists_every_layer() -> None:
    result = CliRunner().invoke(build_app(), ["doctor", "--no-math", "--sandbox", "minimal"])
    assert result.exit_code == 0, result.output
    for name in ("pid_ns", "chroot", "seccomp", "rlimits", "cgroup_memory"):
        assert name in result.output


def test_doctor_rejects_an_unknown_level() -> None:
    result = CliRunner().invoke(build_app(), ["doctor", "--no-math", "--sandbox", "paranoid"])
    assert result.exit_code != 0 and "sandbox" in result.output
