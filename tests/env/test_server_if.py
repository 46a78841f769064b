"""The `if` domain through a real `scalerl-env serve` process: `/v1/verify`, the ledger, the metrics, and the
OpenRLHF (`/get_reward`), veRL (`compute_score`) and TRL (`ScaleRLReward`) adapters with RLVR-IFeval ground
truths handed over bare, as those trainers pass a dataset's `ground_truth` column."""

from __future__ import annotations

import json

import httpx
import pytest
from scalerl.env.adapters import URL_ENV, reference_item
from scalerl.env.client import RewardClient

from tests.support.server_harness import shared_server

PAD = dict.fromkeys(("N", "quantifier", "end_phrase", "keyword_list", "word", "forbidden_words", "letter", "i",
                     "first_word", "postscript_marker", "options", "section_splitter", "original_prompt"))
LOWERCASE = json.dumps({"func_name": "validate_lowercase", **PAD})
THREE_BULLETS = json.dumps({"func_name": "verify_bullet_points", **PAD, "N": 3})
TEMPLATE = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    ledger = tmp_path_factory.mktemp("ledger") / "ledger.duckdb"
    return shared_server(request, "if-domain", "--ledger", str(ledger))


def test_verify_scores_if_items_beside_math_and_records_them(server):
    items = [
        {"id": "a", "domain": "if", "completion": "all in lowercase", "answer": LOWERCASE, "prompt_id": "if-p1",
         "step": 3},
        {"id": "b", "domain": "if", "completion": "Not Lowercase", "answer": LOWERCASE, "prompt_id": "if-p1",
         "step": 3},
        {"id": "c", "domain": "if", "completion": "* one\n* two\n* three", "answer": THREE_BULLETS},
        {"id": "d", "domain": "math", "completion": "\\boxed{4}", "answer": "4"},
    ]
    reply = httpx.post(server.url + "/v1/verify", json={"items": items}, timeout=60)
    assert reply.status_code == 200, reply.text
    results = reply.json()["results"]
    assert [(r["id"], r["status"], r["reward"]) for r in results] == [
        ("a", "correct", 1.0), ("b", "wrong", 0.0), ("c", "correct", 1.0), ("d", "correct", 1.0)]
    assert results[1]["details"]["failed"] == ["change_case:english_lowercase"]
    with RewardClient(server.url) as client:
        rows = client.ledger_query("SELECT domain, count(*), sum(CAST(correct AS INT)) FROM attempts "
                                   "WHERE prompt_id = 'if-p1' GROUP BY domain").rows
    assert rows == [["if", 2, 1]]
    metrics = httpx.get(server.url + "/metrics", timeout=30).text
    assert 'scalerl_verdicts_total{domain="if",status="correct"}' in metrics


def test_a_reference_the_verifier_cannot_score_is_422_naming_the_field(server):
    bad = {"domain": "if", "completion": "x", "answer": json.dumps({"func_name": "validate_haiku"})}
    reply = httpx.post(server.url + "/v1/verify", json={"items": [bad]}, timeout=60)
    assert reply.status_code == 422 and "validate_haiku" in reply.text


def test_openrlhf_get_reward_with_rlvr_labels(server):
    prompts = [TEMPLATE.format("Describe rain. Your entire response should be in English, and in all lowercase "
                               "letters."), TEMPLATE.format("List three fruits as 3 bullet points.")]
    responses = ["rain falls softly.", "* apple\n* pear"]
    body = httpx.post(server.url + "/get_reward", json={
        "query": [p + r for p, r in zip(prompts, responses)], "prompts": prompts,
        "labels": [LOWERCASE, THREE_BULLETS]}, timeout=180).json()
    assert body["rewards"] == [1.0, 0.0]
    assert body["extra_logs"]["prompt_not_stripped"] == [0.0, 0.0]


def test_verl_compute_score_with_a_ground_truth_string_and_object(server, monkeypatch):
    from scalerl.env.adapters.verl import compute_score

    monkeypatch.setenv(URL_ENV, server.url)
    good = compute_score(data_source="allenai/RLVR-IFeval", solution_str="quiet words", ground_truth=LOWERCASE,
                         extra_info={"index": 0})
    bad = compute_score("allenai/RLVR-IFeval", "* only one", json.loads(THREE_BULLETS))  # a dict column
    assert good == {"score": 1.0, "acc": 1.0} and bad == {"score": 0.0, "acc": 0.0}


def test_trl_reward_with_a_ground_truth_column(server):
    from scalerl.env.adapters.trl import ScaleRLReward

    reward = ScaleRLReward(server.url, reference_key="ground_truth")
    scores = reward(prompts=[[{"role": "user", "content": "p"}]] * 2,
                    completions=[[{"role": "assistant", "content": "ok then"}],
                                 [{"role": "assistant", "content": "OK Then"}]],
                    completion_ids=[[1], [2]], ground_truth=[LOWERCASE, LOWERCASE], trainer_state=None)
    assert scores == [1.0, 0.0]


def test_a_bare_math_answer_is_still_math():
    assert reference_item("\\boxed{2}", "2").domain == "math"
    assert reference_item("ok", LOWERCASE).domain == "if"


def test_verify_cli_scores_if_items_with_the_verifier_section(tmp_path):
    from scalerl.env.cli import build_app
    from typer.testing import CliRunner

    end = json.dumps({"func_name": "validate_end", **PAD, "end_phrase": "Any other questions?"})
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps(i) + "\n" for i in [
        {"id": "a", "domain": "if", "completion": "Done. **Any other questions?**", "answer": end},
        {"id": "b", "domain": "if", "completion": "Any other questions? Done.", "answer": end}]))
    for mode, first in (("strict", "wrong"), ("loose", "correct")):
        out = tmp_path / f"{mode}.jsonl"
        result = CliRunner().invoke(build_app(), ["verify", "--file", str(items), "--out", str(out), "--workers", "1",
                                                  f"if.mode={mode}"])
        assert result.exit_code == 0, result.output
        assert [json.loads(line)["status"] for line in out.read_text().splitlines()] == [first, "wrong"]
