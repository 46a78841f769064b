"""The hostile corpus (tests/hostile/*.py, one property each) against the real sandbox.

The corpus runs in one driver process inside a safety net of its own — `unshare` into fresh PID,
network, IPC and mount namespaces, killed with the test — so a sandbox bug cannot harm the machine
running CI. Each program must: not be scored `correct`; leave the host unchanged (no marker files, no
process left running as a sandbox uid, nothing received by a loopback listener, no leaked file or
secret in its output); finish in bounded time with bounded parent memory; and leave the verifier
scoring an honest program `correct` right after.
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
CORPUS = sorted(f[:-3] for f in os.listdir(os.path.join(HERE, "hostile")) if f.endswith(".py") and f != "driver.py")
MAX_ELAPSED_S = 15.0  # wall deadline of a 0.5 s item is 2.5 s; generous for a loaded 2-core machine
MAX_RSS_GROWTH_KB = 64 * 1024


@pytest.fixture(scope="module")
def corpus_results() -> dict[str, dict]:
    if detect_layers()["level"] != "strict":
        pytest.fail(f"this host cannot run the strict sandbox: {detect_layers()}")
    unshare = shutil.which("unshare")
    assert unshare, "util-linux `unshare` is needed for the safety net"
    cmd = [unshare, "--pid", "--net", "--ipc", "--mount", "--fork", "--kill-child", "--mount-proc",
           sys.executable, os.path.join(HERE, "hostile", "driver.py")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400, cwd=REPO, check=False)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    results = {r["name"]: r for r in lines}
    assert "_summary" in results, f"driver failed (rc {proc.returncode}): {proc.stderr[-3000:]}"
    return results


def test_corpus_has_at_least_30_programs_with_one_property_each() -> None:
    assert len(CORPUS) >= 30
    for name in CORPUS:
        with open(os.path.join(HERE, "hostile", name + ".py")) as f:
            assert f.readline().startswith("# property: "), name


@pytest.mark.parametrize("name", CORPUS)
def test_hostile_program_is_contained(name: str, corpus_results: dict) -> None:
    r = corpus_results[name]
    assert r["status"] != "correct", r
    assert r["status"] != "error", r  # the sandbox itself must not break
    assert r["survivors"] == [], r
    assert r["markers_present"] == [], r
    assert not r["leaked"], r
    assert r["elapsed_s"] < MAX_ELAPSED_S, r
    assert r["rss_growth_kb"] < MAX_RSS_GROWTH_KB, r
    assert r["honest"] == "correct", r


def test_loopback_listener_received_nothing(corpus_results: dict) -> None:
    assert corpus_results["_summary"]["listener_received"] == []


def test_kills_are_counted_by_reason(corpus_results: dict) -> None:
    kills = corpus_results["_summary"]["info"]["kills"]
    assert kills["output"] >= 2 and kills["wall"] + kills["cpu"] >= 5 and kills["memory"] >= 1, kills
