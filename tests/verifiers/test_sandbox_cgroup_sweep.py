"""The zygote's sweep of stale cgroups tolerates directories that vanish under it.

Seen in a full test run: two sandboxes starting at once, one's sweep listed `scalerl-<pid>-<n>` and
the other removed it before the first listed its slots; the FileNotFoundError killed the zygote and
an MBPP item came back `error`. Exercised on a plain directory tree (no cgroup filesystem needed).
"""

from __future__ import annotations

import os

from scalerl.verifiers.code.sandbox import _zygote


def test_sweep_skips_a_directory_removed_meanwhile_and_removes_empty_stale_ones(tmp_path, monkeypatch):
    for name in ("scalerl-1-0", "scalerl-2-0", "scalerl-own", "other"):
        (tmp_path / name).mkdir()
    (tmp_path / "scalerl-2-0" / "slot0").mkdir()
    real_listdir = os.listdir

    def racing_listdir(path):
        if str(path).endswith("scalerl-1-0"):
            os.rmdir(path)  # the other sandbox wins the race
            raise FileNotFoundError(path)
        return real_listdir(path)

    monkeypatch.setattr(_zygote.os, "listdir", racing_listdir)
    _zygote._sweep_stale(str(tmp_path), "scalerl-own")
    assert sorted(real_listdir(tmp_path)) == ["other", "scalerl-own"]
