"""Property-based fuzz of the reward server from its own OpenAPI document (schemathesis), bounded.

Every operation, with the server's tokens on (the document declares the bearer scheme, so a request
without the header must be refused). Checks: no 5xx; status codes, content types and response bodies
as documented; every request the document calls valid is accepted (positive data acceptance) and every
request it calls invalid is refused (negative data rejection). The rules the document can only state in
words are kept in positive requests by `tests/support/fuzz_hooks.py`; SQL that the ledger cannot run is
the one schema-valid request answered 400 (documented for that operation). The dashboard's JSON routes
have no run folder behind this server: they answer 404 or the ledger.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.server_harness import REPO, shared_server

CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,"
          "positive_data_acceptance,negative_data_rejection")
TOKEN = "fuzz-token-0123456789abcdef"
# The default statuses of schemathesis's positive check, and 400: SQL the ledger refuses (documented).
SQL_STATUSES = '["2XX", "3XX", 400, 401, 403, 404, 409, 429, "5XX"]'


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "tokens").write_text(f"score {TOKEN}\n")
    return shared_server(request, "fuzz", "--ledger", str(folder / "ledger.duckdb"),
                         "--token-file", str(folder / "tokens"))


def _schemathesis() -> str:
    found = Path(sys.executable).with_name("schemathesis")
    return str(found) if found.exists() else (shutil.which("schemathesis") or "schemathesis")


def _fuzz(server, tmp_path: Path, examples: int) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(f'hooks = "{REPO / "tests" / "support" / "fuzz_hooks.py"}"\n\n'
                      '[[operations]]\ninclude-path = "/v1/ledger/query"\n'
                      f"checks.positive_data_acceptance.expected-statuses = {SQL_STATUSES}\n")
    # One worker: with two, hypothesis describes the query parameters' filters with `ast.parse` in two threads
    # at once, which CPython 3.11.7 answers with "SystemError: AST constructor recursion depth mismatch".
    cmd = [_schemathesis(), "--config-file", str(config), "run", server.url + "/openapi.json", "--checks", CHECKS,
           "-H", f"Authorization: Bearer {TOKEN}", "--max-examples", str(examples), "--workers", "1",
           "--suppress-health-check", "all", "--output-truncate", "false"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False, cwd=tmp_path)
    report = proc.stdout[-8000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, report
    selected, tested = re.search(r"Selected: (\d+)/(\d+)", proc.stdout), re.search(r"Tested: (\d+)", proc.stdout)
    assert selected and tested and selected[1] == selected[2] == tested[1], report  # every operation ran
    assert httpx.get(server.url + "/healthz").status_code == 200
    assert server.proc.poll() is None, server.log()[-3000:]


def test_fuzz_every_operation_with_positive_and_negative_checks(server, tmp_path):
    _fuzz(server, tmp_path, examples=20)


@pytest.mark.slow
def test_fuzz_every_operation_long(server, tmp_path):
    _fuzz(server, tmp_path, examples=150)
