"""Property-based fuzz of the reward server from its own OpenAPI document (schemathesis), time-bounded.

Checks: no 5xx, status codes and content types as documented, response bodies valid against the schema, for
the scoring routes and the dashboard's JSON routes (no run folder behind the server: those answer 404 or the ledger).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.server_harness import shared_server

CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    ledger = tmp_path_factory.mktemp("ledger") / "ledger.duckdb"
    return shared_server(request, "main", "--ledger", str(ledger))


def _schemathesis() -> str:
    found = Path(sys.executable).with_name("schemathesis")
    return str(found) if found.exists() else (shutil.which("schemathesis") or "schemathesis")


def _fuzz(server, max_time_s: int) -> None:
    # One worker: with two, hypothesis describes the query parameters' filters with `ast.parse` in two threads
    # at once, which CPython 3.11.7 answers with "SystemError: AST constructor recursion depth mismatch".
    cmd = [_schemathesis(), "run", server.url + "/openapi.json", "--checks", CHECKS,
           "--max-time", str(max_time_s), "--workers", "1", "--suppress-health-check", "all"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max_time_s + 240, check=False)
    report = proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, report
    assert " passed" in proc.stdout, report
    assert httpx.get(server.url + "/healthz").status_code == 200
    assert server.proc.poll() is None, server.log()[-3000:]


def test_fuzz_from_openapi_no_server_errors(server):
    _fuzz(server, max_time_s=20)


@pytest.mark.slow
def test_fuzz_from_openapi_long(server):
    _fuzz(server, max_time_s=180)
