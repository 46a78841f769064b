"""Reward server, one real `scalerl-env serve` process on a loopback port: every route, bad input, schema drift."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from scalerl.env.client import RewardClient, RewardServerError
from scalerl.env.contracts.records import Status

from tests.support.server_harness import OVERLOAD, REPO, shared_server

BOXED = "Reasoning... so the answer is \\boxed{{{}}}."
SUM_PROGRAM = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
SUM_TESTS = {"kind": "stdio", "cases": [{"input": "1 2\n", "output": "3\n"}, {"input": "5 7\n", "output": "12\n"}]}


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    ledger = tmp_path_factory.mktemp("ledger") / "ledger.duckdb"
    return shared_server(request, "main", "--ledger", str(ledger))


@pytest.fixture(scope="module")
def client(server):
    with RewardClient(server.url, timeout_s=120) as c:
        yield c


def math_item(i: int, answer: str, said: str, **extra) -> dict:
    return {"id": f"m{i}", "domain": "math", "completion": BOXED.format(said), "answer": answer, **extra}


def test_openapi_document_matches_committed_file():
    from scalerl.env.server.openapi import render

    committed = (REPO / "openapi.json").read_text()
    assert json.loads(committed) == json.loads(render()), (
        "the app's OpenAPI schema drifted from openapi.json; run `python -m scalerl.env.server.openapi`"
    )


def test_served_openapi_is_the_committed_one(server):
    served = httpx.get(server.url + "/openapi.json").json()
    assert served == json.loads((REPO / "openapi.json").read_text())


def test_verify_round_trip_keeps_order_and_statuses(client):
    items = [math_item(0, "2", "2"), math_item(1, "\\frac{1}{2}", "0.5"), math_item(2, "7", "8"),
             {"id": "m3", "domain": "math", "completion": "no idea", "answer": "3"}]
    verdicts = client.verify(items)
    assert [v.id for v in verdicts] == ["m0", "m1", "m2", "m3"]
    assert [v.status for v in verdicts] == [Status.correct, Status.correct, Status.wrong, Status.no_answer]
    assert [v.reward for v in verdicts] == [1.0, 1.0, 0.0, 0.0]


def test_code_items_mixed_with_math(client):
    items = [
        {"id": "c0", "domain": "code", "completion": SUM_PROGRAM, "tests": SUM_TESTS},
        math_item(1, "4", "4"),
        {"id": "c2", "domain": "code", "completion": "```python\nprint(0)\n```", "tests": SUM_TESTS},
        {"id": "c3", "domain": "code", "completion": "```python\ndef add(a, b):\n    return a + b\n```",
         "tests": {"kind": "functional", "entry_point": "add", "cases": [{"args": [2, 3], "expected": 5}]}},
    ]
    verdicts = client.verify(items)
    assert [v.id for v in verdicts] == ["c0", "m1", "c2", "c3"]
    assert [v.status for v in verdicts] == [Status.correct, Status.correct, Status.wrong, Status.correct], [
        (v.status, v.details) for v in verdicts]


def test_healthz_and_readyz(server):
    assert httpx.get(server.url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(server.url + "/readyz")
    assert ready.status_code == 200
    body = ready.json()
    assert body["ready"] is True and body["draining"] is False
    assert body["verifier"]["math"]["warm"] >= 1
    assert body["sandbox"]["meets_minimum"] is True and body["sandbox"]["minimum"] == "strict", body["sandbox"]
    assert body["sandbox"]["layers"]["rlimits"] is True


def test_metrics_text_format_counts_verdicts_and_has_no_per_item_labels(server, client):
    client.verify([math_item(0, "5", "5"), math_item(1, "5", "6")])
    response = httpx.get(server.url + "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    for name in ("scalerl_verdicts_total", "scalerl_request_seconds_bucket", "scalerl_items_in_flight",
                 "scalerl_build_info", "scalerl_item_verify_seconds_bucket", "scalerl_requests_rejected"):
        assert name in text, name
    correct = _sample(text, 'scalerl_verdicts_total{domain="math",status="correct"}')
    wrong = _sample(text, 'scalerl_verdicts_total{domain="math",status="wrong"}')
    assert correct >= 1 and wrong >= 1
    assert "prompt_id" not in text and 'id="' not in text


def test_sandbox_kills_are_counted_by_reason(server, client):
    spin = {"domain": "code", "completion": "```python\nwhile True:\n    pass\n```",
            "tests": {"kind": "stdio", "cases": [{"output": "1"}]}, "limits": {"time_s": 0.2}}
    cpu_kills = 'scalerl_verifier_kills_total{domain="code",reason="cpu"}'
    before = _sample(httpx.get(server.url + "/metrics").text, cpu_kills, 0.0)
    assert client.verify([spin])[0].status == Status.timeout
    after = _sample(httpx.get(server.url + "/metrics").text, cpu_kills)
    assert after == before + 1


def _sample(text: str, series: str, default: float | None = None) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    if default is not None:
        return default
    raise AssertionError(f"{series} not in /metrics")


def test_items_with_prompt_id_are_in_the_ledger_when_acknowledged(client):
    items = [math_item(i, "9", "9" if i % 2 else "1", prompt_id="api-ledger-p1", step=3, sample_index=i)
             for i in range(4)]
    client.verify(items)
    result = client.ledger_query(
        "SELECT count(*), sum(CASE WHEN correct THEN 1 ELSE 0 END) FROM attempts WHERE prompt_id = 'api-ledger-p1'"
    )
    assert result.rows == [[4, 2]]


def test_ledger_query_rejects_writes_with_400(server):
    response = httpx.post(server.url + "/v1/ledger/query", json={"sql": "DELETE FROM attempts"})
    assert response.status_code == 400
    assert "Error" in response.json()["detail"]


def test_ledger_query_without_ledger_is_409(request):
    bare = shared_server(request, "overload", *OVERLOAD)  # the load tests' ledger-less server
    response = httpx.post(bare.url + "/v1/ledger/query", json={"sql": "SELECT 1"})
    assert response.status_code == 409
    assert "--ledger" in response.json()["detail"]


def test_schema_error_is_422_naming_the_field(server):
    bad = {"items": [math_item(0, "1", "1"), {"id": "x", "domain": "math", "completion": "hi"}]}
    response = httpx.post(server.url + "/v1/verify", json=bad)
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "items.1"
    unknown = {"items": [{**math_item(0, "1", "1"), "answr": "1"}]}
    detail = httpx.post(server.url + "/v1/verify", json=unknown).json()["detail"]
    assert any(d["field"] == "items.0.answr" and d["type"] == "extra_forbidden" for d in detail)


def test_malformed_json_is_422_with_the_offset(server):
    response = httpx.post(server.url + "/v1/verify", content=b'{"items": [',
                          headers={"content-type": "application/json"})
    assert response.status_code == 422
    error = response.json()["detail"][0]
    assert error["field"] == "body" and "character 11" in error["msg"]


def test_invalid_utf8_is_400_and_lone_surrogate_is_422(server):
    raw = b'{"items": [{"domain": "math", "completion": "\xff\xfe", "answer": "1"}]}'
    response = httpx.post(server.url + "/v1/verify", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 400 and "UTF-8" in response.json()["detail"]
    escaped = b'{"items": [{"domain": "math", "completion": "\\ud800", "answer": "1"}]}'
    response = httpx.post(server.url + "/v1/verify", content=escaped, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "items.0.completion"


def test_oversized_body_and_batch_are_413(server):
    huge = b'{"items": [' + b" " * (33 << 20) + b"]}"
    response = httpx.post(server.url + "/v1/verify", content=huge, headers={"content-type": "application/json"})
    assert response.status_code == 413
    many = {"items": [math_item(i, "1", "1") for i in range(1025)]}
    response = httpx.post(server.url + "/v1/verify", json=many)
    assert response.status_code == 413 and "max_batch_items" in response.json()["detail"]


def test_deeply_nested_json_is_a_clean_4xx(server):
    nested = b'{"items": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    response = httpx.post(server.url + "/v1/verify", content=nested, headers={"content-type": "application/json"})
    assert 400 <= response.status_code < 500
    assert httpx.get(server.url + "/healthz").status_code == 200


def test_client_raises_with_status_and_detail(client):
    with pytest.raises(RewardServerError) as info:
        client.verify([{"domain": "math", "completion": "x"}])
    assert info.value.status == 422


def test_empty_batch_is_answered_empty(client):
    assert client.verify([]) == []
    assert httpx.post(client.base_url + "/v1/verify", json={"items": []}).json() == {"results": []}


def test_async_client_batches_in_order(server):
    import asyncio

    from scalerl.env.client import AsyncRewardClient

    async def run():
        async with AsyncRewardClient(server.url, batch_size=3, concurrency=4) as c:
            return await c.verify([math_item(i, str(i), str(i if i % 3 else -1)) for i in range(20)])

    verdicts = asyncio.run(run())
    assert [v.id for v in verdicts] == [f"m{i}" for i in range(20)]
    assert [v.status == Status.correct for v in verdicts] == [bool(i % 3) for i in range(20)]


def test_cli_rejects_bad_config_with_exit_2(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "server.yaml"
    bad.write_text("limits:\n  max_batch_items: 0\n")
    proc = subprocess.run([sys.executable, "-m", "scalerl.env.cli", "serve", "--config", str(bad)],
                          cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert "limits.max_batch_items" in proc.stderr


CURRICULUM_ROUTES = {"/v1/curriculum/sets": "post", "/v1/curriculum/sets/{name}": "get",
                     "/v1/curriculum/sets/{name}/draw": "post", "/v1/curriculum/sets/{name}/report": "post"}


def test_committed_openapi_lists_every_route():
    """The scoring routes and the dashboard's JSON routes, each with a typed 200 body; its pages are not in it."""
    from tests.env.test_dashboard_api import DASH_ROUTES
    from tests.env.test_server_episodes import EPISODE_ROUTES

    paths = json.loads(Path(REPO / "openapi.json").read_text())["paths"]
    assert set(paths) == {"/v1/verify", "/healthz", "/readyz", "/metrics", "/v1/ledger/query", "/get_reward",
                          "/v1/ledger/ingest", *DASH_ROUTES, *CURRICULUM_ROUTES, *EPISODE_ROUTES}
    assert "$ref" in paths["/v1/ledger/ingest"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    for p, method in CURRICULUM_ROUTES.items():
        assert "$ref" in paths[p][method]["responses"]["200"]["content"]["application/json"]["schema"], p
        assert "409" in paths[p][method]["responses"], p  # the answer of a server without a ledger
    for p in DASH_ROUTES:
        ok = paths[p]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert "$ref" in ok or "$ref" in ok.get("items", {}), p
        assert set(paths[p]["get"]["responses"]) - {"200", "422"} <= {"401", "403", "404", "503"}, p


def test_ledger_cli_queries_through_the_server(server, client):
    import subprocess
    import sys

    client.verify([math_item(0, "3", "3", prompt_id="api-cli-p")])
    proc = subprocess.run(
        [sys.executable, "-m", "scalerl.env.cli", "ledger", "query", "--url", server.url,
         "SELECT count(*) AS n FROM attempts WHERE prompt_id = 'api-cli-p'"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "1" in proc.stdout


def test_second_server_on_an_owned_ledger_exits_with_a_clear_error(server):
    import subprocess
    import sys

    from tests.support.server_harness import free_port

    ledger = server.args[server.args.index("--ledger") + 1]
    proc = subprocess.run([sys.executable, "-m", "scalerl.env.cli", "serve", "--port", str(free_port()),
                           "--ledger", ledger], cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0
    assert "start-up failed" in proc.stderr and ledger in proc.stderr
    assert httpx.get(server.url + "/healthz").status_code == 200


def test_numbers_and_flags_are_json_types_not_coerced(server):
    """`false` is not 0 and "5" is not 5: the document says integer/boolean, and so does the server."""
    for field, value in (("step", False), ("step", "5"), ("sample_index", True), ("truncated", 1)):
        item = math_item(0, "1", "1", prompt_id="strict-1", **{field: value})
        response = httpx.post(server.url + "/v1/verify", json={"items": [item]})
        assert response.status_code == 422, (field, value, response.text)
        assert response.json()["detail"][0]["field"] == f"items.0.{field}"
    whole = httpx.post(server.url + "/v1/verify", json={"items": [math_item(0, "1", "1", step=4.0)]})
    assert whole.status_code == 200, whole.text  # 4.0 is a JSON Schema integer


def test_a_bare_item_gets_one_error_naming_the_wrapper(server):
    response = httpx.post(server.url + "/v1/verify", json=math_item(0, "1", "1"))
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert len(detail) == 1 and '{"items": [ITEM, ...]}' in detail[0]["msg"], detail


def test_a_structured_answer_is_told_to_go_as_json_text(server):
    constraints = {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}
    item = {"domain": "if", "completion": "no commas here", "answer": constraints}
    response = httpx.post(server.url + "/v1/verify", json={"items": [item]})
    assert response.status_code == 422
    error = response.json()["detail"][0]
    assert error["field"] == "items.0.answer" and "JSON text" in error["msg"] and "json.dumps" in error["msg"]
    sent_as_text = httpx.post(server.url + "/v1/verify", json={"items": [{**item, "answer": json.dumps(constraints)}]})
    assert sent_as_text.status_code == 200 and sent_as_text.json()["results"][0]["status"] == "correct"


def test_422_is_logged_with_method_path_and_field(server):
    httpx.post(server.url + "/v1/verify", json={"items": [math_item(0, "1", "1", policy_version="x7")]})
    deadline = time.monotonic() + 10
    while "items.0.policy_version" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    line = next(ln for ln in server.log().splitlines() if "items.0.policy_version" in ln)
    assert "422 POST /v1/verify" in line


def test_a_query_parameter_given_twice_is_422(server):
    response = httpx.get(server.url + "/api/dash/prompts?q=a&limit=5&limit=7")
    assert response.status_code == 422 and response.json()["detail"][0]["field"] == "query.limit"
