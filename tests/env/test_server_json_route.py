"""The scoring routes' JSON fast path (`routes.HotRoutes`): it answers every body exactly as FastAPI's
routing and handler do (verdicts, 422s, and the errors that scoring raises, headers included), and it
only accepts bodies that FastAPI's validation accepts, as the same model."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from scalerl.env.server.models import RewardRequest, VerifyRequest

from tests.support.server_harness import OVERLOAD, shared_server

FAST = {"content-type": "application/json"}
STANDARD = {"content-type": "application/vnd.scalerl+json"}  # parsed as JSON by FastAPI, not by the fast path
SUM_TESTS = {"kind": "stdio", "cases": [{"input": "1 2\n", "output": "3\n"}]}
BODIES = [
    {"items": [{"id": "a", "domain": "math", "completion": "so \\boxed{2}", "answer": "2"},
               {"id": "b", "domain": "math", "completion": "so \\boxed{3}", "answer": "2", "step": 4.0},
               {"id": "c", "domain": "code", "completion": "```python\nprint(3)\n```", "tests": SUM_TESTS}]},
    {"items": [{"domain": "math", "completion": "\\boxed{1}"}]},  # no answer: 422 naming items.0
    {"items": [{"domain": "math", "completion": "\\boxed{1}", "answer": "1", "answr": "1"}]},  # unknown field
    {"items": [{"domain": "math", "completion": "\\boxed{1}", "answer": "1", "step": -1}]},  # out of range
    {"items": "nope"},
    {},
]
RAW = [
    b'{"items": [',  # malformed JSON: 422 with the offset
    b'{"items": [{"domain": "math", "completion": "\\ud800", "answer": "1"}]}',  # lone surrogate
    b'{"items": [{"domain": "math", "completion": "a", "completion": "\\\\boxed{1}", "answer": "1"}]}',  # repeated key
    b"",
]


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    ledger = tmp_path_factory.mktemp("ledger") / "ledger.duckdb"
    return shared_server(request, "main", "--ledger", str(ledger))  # the API tests' server


def answer(response: httpx.Response) -> tuple[int, object]:
    """Status and body, without the verifier's timings (they differ from one scoring to the next)."""
    body = response.json()
    for verdict in body.get("results", []) if isinstance(body, dict) else []:
        verdict.pop("elapsed_s")
        for test in (verdict.get("details") or {}).get("tests", []):
            test.pop("cpu_s"), test.pop("wall_s")
    return response.status_code, body


@pytest.mark.parametrize("body", [json.dumps(b).encode() for b in BODIES] + RAW)
def test_fast_path_answers_every_body_like_fastapis_handler(server, body):
    fast = httpx.post(server.url + "/v1/verify", content=body, headers=FAST, timeout=60)
    standard = httpx.post(server.url + "/v1/verify", content=body, headers=STANDARD, timeout=60)
    assert answer(fast) == answer(standard)
    assert fast.status_code in (200, 422)


def test_reward_route_takes_the_fast_path_with_the_same_answers(server):
    body = json.dumps({"query": ["q \\boxed{2}", "q \\boxed{5}"], "labels": ["2", "3"]}).encode()
    fast = httpx.post(server.url + "/get_reward", content=body, headers=FAST, timeout=60)
    standard = httpx.post(server.url + "/get_reward", content=body, headers=STANDARD, timeout=60)
    assert fast.status_code == 200 and fast.json()["rewards"][0] > fast.json()["rewards"][1]
    assert fast.json()["scores"] == standard.json()["scores"] == [1.0, 0.0]


def test_only_endpoints_that_build_their_response_take_the_fast_path():
    from scalerl.env.server.app import create_app
    from scalerl.env.server.routes import HotRoutes, router

    assert set(HotRoutes(None, router.routes).hot) == {"/v1/verify", "/get_reward"}  # /v1/ledger/query
    # returns a model FastAPI serialises; GET routes take no body
    assert [m.cls for m in create_app().user_middleware].count(HotRoutes) == 1


def test_errors_raised_while_scoring_are_answered_like_fastapis_handler(request):
    """A 413 for too many items comes from the endpoint as an `HTTPException` (as do 503 and 504): the fast
    path hands it to the app's exception handler, so status, body and headers are FastAPI's."""
    server = shared_server(request, "overload", *OVERLOAD)  # limits.max_batch_items=8
    item = {"domain": "math", "completion": "\\boxed{2}", "answer": "2"}
    for path, body in (("/v1/verify", {"items": [item] * 9}),
                       ("/get_reward", {"query": ["\\boxed{2}"] * 9, "labels": ["2"] * 9})):
        raw = json.dumps(body).encode()
        fast = httpx.post(server.url + path, content=raw, headers=FAST, timeout=60)
        standard = httpx.post(server.url + path, content=raw, headers=STANDARD, timeout=60)
        assert fast.status_code == standard.status_code == 413
        assert fast.json() == standard.json() and "max_batch_items=8" in fast.json()["detail"]
        assert fast.headers["content-type"] == standard.headers["content-type"] == "application/json"


TEXT = st.text(st.characters(codec="utf-16", exclude_categories=()), max_size=12)  # lone surrogates included
NUMBER = st.one_of(st.none(), st.integers(min_value=-2, max_value=2**64), st.integers(0, 9).map(float),
                   st.floats(allow_nan=True, allow_infinity=True), st.integers(0, 99).map(str), TEXT)
FLAG = st.one_of(st.none(), st.booleans(), st.sampled_from([0, 1, 2, "true", "no", "x", 1.0, 0.5]))
ITEM = st.fixed_dictionaries(  # mostly valid math items, with the coercions lax validation allows
    {"domain": st.sampled_from(["math", "math", "math", "code"]), "completion": TEXT, "answer": TEXT},
    optional={"step": NUMBER, "sample_index": NUMBER, "completion_tokens": NUMBER, "truncated": FLAG,
              "id": TEXT, "prompt_id": st.one_of(st.none(), TEXT), "limits": st.just({"time_s": 1})},
)


@settings(max_examples=400, deadline=None)
@given(items=st.lists(ITEM, max_size=3), ascii_only=st.booleans())
def test_fast_validation_accepts_only_what_fastapi_accepts_as_the_same_model(items, ascii_only):
    """`model_validate_json` on the bytes vs FastAPI's `json.loads` + `model_validate`: where the first
    accepts, the second gives the same model (elsewhere the fast path hands the body to FastAPI)."""
    for model in (VerifyRequest, RewardRequest):
        data = {"items": items} if model is VerifyRequest else {"query": [i["completion"] for i in items],
                                                               "labels": [i.get("answer") for i in items]}
        raw = json.dumps(data, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
        try:
            fast = model.model_validate_json(raw)
        except ValidationError:
            continue
        assert model.model_validate(json.loads(raw)) == fast
