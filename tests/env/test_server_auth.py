"""Authentication and TLS of a real `scalerl-env serve`: 401 vs 403 by scope, open probes, the refusal to
bind a routable address anonymously, an HTTPS round trip with a certificate made here, and the OpenAPI
security scheme."""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import sys
import time

import httpx
import pytest
from scalerl.env.client import TOKEN_ENV, RewardClient, RewardServerError
from scalerl.env.server.auth import (
    SecurityConfig,
    TokenFileError,
    exposure_problem,
    load_tokens,
    owner_token,
    required_scope,
)

from tests.support.server_harness import REPO, ServerProcess, shared_server

SCORE, READ = "score-token-0123456789abcdef", "read-token-0123456789abcdef"
ITEM = {"id": "a", "domain": "math", "completion": "\\boxed{2}", "answer": "2", "prompt_id": "auth-1"}


def token_file(path, text: str = f"# scope token\nscore {SCORE}\nread  {READ}   # dashboards\n"):
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("auth")
    return shared_server(request, "auth", "--token-file", str(token_file(tmp / "tokens")),
                         "--ledger", str(tmp / "ledger.duckdb"))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def post(server, path: str, body: dict, headers: dict | None = None) -> httpx.Response:
    return httpx.post(server.url + path, json=body, headers=headers or {}, timeout=60)


def rejected(server, reason: str) -> float:
    text = httpx.get(server.url + "/metrics", headers=bearer(READ)).text
    series = f'scalerl_requests_rejected_total{{reason="{reason}"}}'
    return next((float(line.split()[-1]) for line in text.splitlines() if line.startswith(series)), 0.0)


@pytest.mark.parametrize("path,body", [("/v1/verify", {"items": [ITEM]}),
                                       ("/get_reward", {"query": ["\\boxed{2}"], "labels": ["2"]})])
def test_scoring_needs_a_score_token(server, path, body):
    before = rejected(server, "unauthorized"), rejected(server, "forbidden")
    missing = post(server, path, body)
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == 'Bearer realm="scalerl"'
    assert "authentication required" in missing.json()["detail"]
    wrong = post(server, path, body, bearer("not-a-token-of-this-server"))
    assert wrong.status_code == 401 and 'error="invalid_token"' in wrong.headers["www-authenticate"]
    assert wrong.json()["detail"] == "invalid bearer token"
    read_only = post(server, path, body, bearer(READ))
    assert read_only.status_code == 403
    assert read_only.json()["detail"] == f"this token has scope 'read'; POST {path} needs scope 'score'"
    assert 'error="insufficient_scope", scope="score"' in read_only.headers["www-authenticate"]
    assert (rejected(server, "unauthorized"), rejected(server, "forbidden")) == (before[0] + 2, before[1] + 1)
    assert post(server, path, body, bearer(SCORE)).status_code == 200


def test_read_token_reads_and_probes_stay_open(server):
    with RewardClient(server.url, token=SCORE) as scorer:
        assert scorer.verify([ITEM])[0].status.value == "correct"
    with RewardClient(server.url, token=READ) as reader:
        rows = reader.ledger_query("SELECT count(*) FROM attempts WHERE prompt_id = 'auth-1'").rows
        assert rows[0][0] >= 1
        assert "scalerl_verdicts_total" in reader.metrics_text()
        with pytest.raises(RewardServerError) as info:
            reader.verify([ITEM])
        assert info.value.status == 403 and reader.stats().retries == 0  # not retried
    for path in ("/healthz", "/readyz"):
        assert httpx.get(server.url + path).status_code == 200
    for path in ("/metrics", "/openapi.json", "/api/dash/info"):
        assert httpx.get(server.url + path).status_code == 401, path
    assert post(server, "/v1/ledger/query", {"sql": "SELECT 1"}).status_code == 401


def test_routes_are_classified_by_method_and_path():
    assert required_scope("GET", "/healthz") is None and required_scope("GET", "/readyz") is None
    assert required_scope("GET", "/v1/curriculum/state").value == "read"
    assert required_scope("POST", "/v1/ledger/query").value == "read"
    for path in ("/v1/verify", "/get_reward", "/v1/curriculum/draw", "/v1/curriculum/report", "/v1/anything-new"):
        assert required_scope("POST", path).value == "score", path
    assert required_scope("DELETE", "/v1/ledger/query").value == "score"


def test_token_file_errors_name_the_line(tmp_path):
    for text, message in [("score short\n", ":1: a token must be at least 16"),
                          (f"admin {SCORE}\n", ":1: unknown scope 'admin'"),
                          (f"# c\nscore {SCORE} extra\n", ":2: expected `SCOPE TOKEN`, got 3 fields"),
                          (f"score {SCORE}\nread {SCORE}\n", ":2: token repeated (first on line 1)"),
                          ("# nothing\n", "no tokens in the file")]:
        with pytest.raises(TokenFileError, match=re.escape(message)):
            load_tokens(token_file(tmp_path / "t", text))
    tokens = load_tokens(token_file(tmp_path / "t"))
    assert tokens.access_of(SCORE).value == "score" and tokens.access_of(READ).value == "read"
    assert tokens.access_of(SCORE[:-1]) is None and tokens.access_of("") is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "node17.cluster"])
def test_serve_refuses_a_routable_address_without_tokens(host):
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "scalerl.env.cli", "serve", "--host", host, "--port", "0"],
                          cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert f"refusing to bind {host!r}" in proc.stderr and "--token-file" in proc.stderr
    assert "--insecure" in proc.stderr
    assert time.monotonic() - start < 30  # refused before the app, the pool or the ledger is loaded


def test_exposure_rules(tmp_path):
    for host in ("127.0.0.1", "127.0.0.2", "::1", "localhost", "[::1]"):
        assert exposure_problem(host, SecurityConfig()) is None, host
    assert exposure_problem("0.0.0.0", SecurityConfig(insecure=True)) is None
    assert exposure_problem("0.0.0.0", SecurityConfig(token_file="tokens")) is None
    proc = subprocess.run([sys.executable, "-m", "scalerl.env.cli", "serve", "--host", "0.0.0.0",
                           "--token-file", str(token_file(tmp_path / "t", "score x\n"))],
                          cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and ":1: a token must be at least 16" in proc.stderr
    with pytest.raises(ValueError, match="ssl_certfile and ssl_keyfile go together"):
        SecurityConfig(ssl_certfile="cert.pem")


def test_owner_token_from_its_file_or_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert owner_token(SecurityConfig()) is None
    monkeypatch.setenv(TOKEN_ENV, SCORE)
    assert owner_token(SecurityConfig()) == SCORE
    (tmp_path / "owner").write_text(f"# the ledger owner's score token\n{READ}\n")
    assert owner_token(SecurityConfig(owner_token_file=str(tmp_path / "owner"))) == READ


def test_openapi_documents_the_bearer_scheme():
    doc = json.loads((REPO / "openapi.json").read_text())
    assert doc["components"]["securitySchemes"]["bearerAuth"] == {**doc["components"]["securitySchemes"]["bearerAuth"],
                                                                  "type": "http", "scheme": "bearer"}
    assert doc["paths"]["/v1/verify"]["post"]["security"] == [{"bearerAuth": ["score"]}]
    assert doc["paths"]["/v1/ledger/query"]["post"]["security"] == [{"bearerAuth": ["read"]}]
    assert doc["paths"]["/healthz"]["get"]["security"] == []
    assert {"401", "403"} <= set(doc["paths"]["/v1/verify"]["post"]["responses"])


class TlsServer(ServerProcess):
    """A server on HTTPS with a self-signed certificate; readiness polled over TLS, trusting it."""

    def __init__(self, cert, *args: str) -> None:
        super().__init__(*args)
        self.trust = self.verify = ssl.create_default_context(cafile=str(cert))

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"


def self_signed(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def test_tls_round_trip_with_a_ca_file(tmp_path):
    cert, key = self_signed(tmp_path)
    server = TlsServer(cert, "--ssl-certfile", str(cert), "--ssl-keyfile", str(key),
                       "--token-file", str(token_file(tmp_path / "tokens"))).start()
    try:
        with RewardClient(server.url, token=SCORE, verify=str(cert)) as client:
            assert client.verify([ITEM])[0].status.value == "correct"
        with RewardClient(server.url, token=SCORE, max_retries=5) as untrusting:  # the system CAs only
            with pytest.raises(RewardServerError, match="TLS.*CERTIFICATE_VERIFY_FAILED"):
                untrusting.verify([ITEM])
            assert untrusting.stats().retries == 0  # a certificate failure is not retried
        plain = server.url.replace("https://", "http://")
        with pytest.raises(httpx.HTTPError):
            httpx.post(plain + "/v1/verify", json={"items": [ITEM]}, headers=bearer(SCORE), timeout=10)
    finally:
        server.stop()


def test_ledger_cli_sends_the_token_from_the_environment(server):
    import os

    with RewardClient(server.url, token=SCORE) as client:
        client.verify([{**ITEM, "prompt_id": "auth-cli"}])
    query = [sys.executable, "-m", "scalerl.env.cli", "ledger", "query", "--url", server.url,
             "SELECT count(*) AS n FROM attempts WHERE prompt_id = 'auth-cli'"]
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    refused = subprocess.run(query, cwd=REPO, capture_output=True, text=True, timeout=120, check=False, env=env)
    assert refused.returncode != 0 and "owner answered 401" in refused.stderr
    assert TOKEN_ENV in refused.stderr and "--token" in refused.stderr and "--token-file" in refused.stderr
    proc = subprocess.run(query, cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
                          env={**env, TOKEN_ENV: READ})
    assert proc.returncode == 0, proc.stderr
    assert "1" in proc.stdout


def test_ledger_cli_takes_the_token_as_an_option_or_a_file(server, tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    (tmp_path / "read.token").write_text(f"# a read token\n{READ}\n")
    base = [sys.executable, "-m", "scalerl.env.cli", "ledger"]
    for how in (["--token", READ], ["--token-file", str(tmp_path / "read.token")]):
        for command in (["query", "--url", server.url, "SELECT 41 + 1 AS n"], ["stats", "--url", server.url]):
            proc = subprocess.run(base + command + how, cwd=REPO, capture_output=True, text=True, timeout=120,
                                  check=False, env=env)
            assert proc.returncode == 0, (command, how, proc.stderr)
    both = subprocess.run(base + ["query", "--url", server.url, "SELECT 1", "--token", READ, "--token-file",
                                  str(tmp_path / "read.token")], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False, env=env)
    assert both.returncode == 2 and "not both" in both.stderr


def test_refusals_are_logged_without_the_token(server):
    wrong = "wrong-token-0123456789abcdef"
    post(server, "/v1/verify", {"items": [ITEM]}, bearer(wrong))
    post(server, "/v1/verify", {"items": [ITEM]}, bearer(READ))
    deadline = time.monotonic() + 10
    while "403 POST /v1/verify" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    log = server.log()
    assert "401 POST /v1/verify: unknown bearer token" in log and "403 POST /v1/verify" in log
    assert wrong not in log and READ not in log


def test_curriculum_routes_are_covered(server):
    sets = server.url + "/v1/curriculum/sets"
    assert httpx.get(sets).status_code == 401
    assert httpx.get(sets, headers=bearer(READ)).status_code not in (401, 403)
    for path in ("/v1/curriculum/sets", "/v1/curriculum/sets/any/draw", "/v1/curriculum/sets/any/report"):
        assert post(server, path, {}).status_code == 401, path
        refused = post(server, path, {}, bearer(READ))
        assert refused.status_code == 403 and "needs scope 'score'" in refused.json()["detail"], path
        assert post(server, path, {}, bearer(SCORE)).status_code not in (401, 403), path
