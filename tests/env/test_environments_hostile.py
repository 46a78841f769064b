"""The hostile corpus through both multi-turn environments: the tool path (`math-tool`) and the feedback
path (`code-feedback`). Every call gets an observation or a verdict (never `error`, never `correct` on
the feedback path), nothing survives an episode (no process as a sandbox uid, no marker file on the
host), nothing leaks (no secret, no hidden test), an honest episode right after still scores 1, and
an episode whose model never stops calling a never-ending tool is cut at `max_turns`.

The driver (tests/env/environments_hostile_driver.py) runs in its own PID, network, IPC and mount
namespaces, as the corpus's own test does, so that a sandbox bug cannot harm the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from scalerl.verifiers.code.sandbox import detect_layers

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CORPUS_DIR = os.path.join(REPO, "tests", "verifiers", "hostile")
CORPUS = sorted(f[:-3] for f in os.listdir(CORPUS_DIR) if f.endswith(".py") and f != "driver.py")
MAX_EPISODE_S = 30.0  # a few runs, each past a 0.5 s CPU limit's wall deadline (2.5 s) at worst, on a loaded host


@pytest.fixture(scope="module")
def results() -> dict[tuple[str, str], dict]:
    if detect_layers()["level"] != "strict":
        pytest.fail(f"this host cannot run the strict sandbox: {detect_layers()}")
    unshare = shutil.which("unshare")
    assert unshare, "util-linux `unshare` is needed for the safety net"
    cmd = [unshare, "--pid", "--net", "--ipc", "--mount", "--fork", "--kill-child", "--mount-proc",
           sys.executable, os.path.join(HERE, "environments_hostile_driver.py")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=REPO, check=False)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    found = {(r["name"], r.get("path", "")): r for r in lines}
    assert ("_summary", "") in found, f"driver failed (rc {proc.returncode}): {proc.stderr[-3000:]}"
    return found


@pytest.mark.parametrize("path", ["tool", "feedback"])
@pytest.mark.parametrize("name", CORPUS)
def test_hostile_program_is_contained_in_an_episode(name: str, path: str, results: dict) -> None:
    r = results[(name, path)]
    assert r["done"] and r["status"] not in (None, "error"), r
    if path == "tool":
        assert r["info"]["tool_calls"] == 1 and r["status"] == "correct", r  # the answer after the call counts
    else:
        assert r["status"] != "correct", r
    assert r["survivors"] == [] and r["markers_present"] == [] and not r["leaked"], r
    assert r["elapsed_s"] < MAX_EPISODE_S and r["honest"] == "correct", r


def test_an_episode_that_never_stops_calling_the_tool_is_cut_at_max_turns(results: dict) -> None:
    r = results[("_endless", "")]
    assert r["done"] and r["turns"] == 4 and r["info"]["ended"] == "max_turns" and r["info"]["tool_calls"] == 3, r
    assert r["survivors"] == [] and r["elapsed_s"] < 4 * MAX_EPISODE_S, r


def test_the_loopback_listener_received_nothing(results: dict) -> None:
    assert results[("_summary", "")]["listener_received"] == []
