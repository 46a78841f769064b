"""The suite's rules in tests/conftest.py hold: selecting the tests of a library that cannot load fails the run.

Each case runs pytest in a subprocess with a stand-in package first on the path that is installed but
fails to import (a missing dependency raises ModuleNotFoundError, the error `importorskip` turns into a
skip): the `vllm` run stops with a usage error naming the cause, the `rl` run errors at collection.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from scalerl.env.contracts.paths import REPO

from tests.conftest import RL_STRICT_ENV, selects


def broken_package(folder: Path, name: str) -> Path:
    (folder / name).mkdir()
    (folder / name / "__init__.py").write_text("import scalerl_missing_dependency\n")
    return folder


def run_pytest(path_first: Path, markexpr: str, test_file: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != RL_STRICT_ENV}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(path_first), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", markexpr, test_file],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("markexpr", "selected"), [
    ("vllm", True), ("vllm and not slow", True), ("(vllm)", True), ("not vllm", False),
    ("not slow and not vllm", False), ("vllm_other", False), ("", False),
])
def test_selects_reads_the_marker_expression(markexpr, selected):
    assert selects("vllm", markexpr) is selected


def test_a_vllm_run_where_vllm_fails_to_import_is_a_usage_error(tmp_path):
    done = run_pytest(broken_package(tmp_path, "vllm"), "vllm and not slow", "tests/trainer/test_vllm_validation.py")
    output = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert "vllm does not import here (ModuleNotFoundError: No module named 'scalerl_missing_dependency')" in output


def test_an_rl_run_where_its_library_fails_to_import_errors(tmp_path):
    done = run_pytest(broken_package(tmp_path, "trl"), "rl and not slow", "tests/env/test_curriculum_trl.py")
    output = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "No module named 'scalerl_missing_dependency'" in output and "skipped" not in output
