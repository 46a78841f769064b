"""The OpenAPI document states the rules between fields that the server enforces (scalerl.env.server.openapi_rules).

Requests are checked against the committed document with a JSON Schema validator: what the server refuses
for a rule between fields, the document calls invalid; what it accepts, valid. A plug-in domain gets its
own branch in a process where it is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from jsonschema import Draft202012Validator

from tests.support.plugin_domain import install_word_plugin
from tests.support.server_harness import REPO

DOCUMENT = json.loads((REPO / "openapi.json").read_text())
MATH = {"domain": "math", "completion": "\\boxed{2}", "answer": "2"}
CODE = {"domain": "code", "completion": "print(1)", "tests": {"kind": "stdio", "cases": [{"output": "1"}]}}
IDS = {"prompt_id": "p1", "domain": "math"}
PROBLEM = {"prompt_id": "p2", "domain": "math", "prompt": [{"role": "user", "content": "1+1?"}], "answer": "2"}


def valid(component: str, body: object) -> bool:
    schema = {"$ref": f"#/components/schemas/{component}", "components": DOCUMENT["components"]}
    return Draft202012Validator(schema).is_valid(body)


@pytest.mark.parametrize("component,body,ok", [
    ("VerifyRequest", {"items": [MATH, CODE]}, True),
    ("VerifyRequest", {"items": [{**MATH, "answer": None}]}, False),  # a math item needs its answer
    ("VerifyRequest", {"items": [{k: v for k, v in CODE.items() if k != "tests"}]}, False),  # code: its tests
    ("VerifyRequest", {"items": [{**MATH, "domain": "chem"}]}, False),  # not an installed domain
    ("VerifyRequest", {"items": [{**CODE, "tests": {"cases": [{"output": "1"}]}}]}, False),  # the kind is required
    ("VerifyRequest", {"items": [{**MATH, "step": False}]}, False),
    ("VerifyRequest", {"items": [{**MATH, "step": 4.0}]}, True),
    ("VerifyRequest", {"items": [MATH] * 1025}, False),  # limits.max_batch_items
    ("RegisterSetRequest", {"name": "s", "records": [IDS, PROBLEM]}, True),
    ("RegisterSetRequest", {"name": "s", "parquet": "train.parquet", "heldout_parquet": "held.parquet"}, True),
    ("RegisterSetRequest", {"name": "s"}, False),  # neither parquet nor records
    ("RegisterSetRequest", {"name": "s", "parquet": "train.parquet", "records": [IDS]}, False),  # both
    ("RegisterSetRequest", {"name": "s", "records": [IDS], "heldout_parquet": "held.parquet"}, False),
    ("RegisterSetRequest", {"name": "s", "records": [{**IDS, "split": "heldout"}]}, False),  # no training prompt
    ("RegisterSetRequest", {"name": "s", "records": [{**PROBLEM, "answer": None}]}, False),  # a problem's answer
    ("RegisterSetRequest", {"name": "s", "records": [{**IDS, "answer": "2"}]}, False),  # a reference needs a prompt
    ("RegisterSetRequest", {"name": "s", "records": [IDS], "domain_weights": {"math": -1}}, False),
    ("DrawRequest", {"draw_id": 0, "n": 1, "rank": False}, False),
    ("DrawRequest", {"draw_id": 0, "n": 1, "rank": 1, "world_size": 2}, True),
    ("ReportRequest", {"groups": [{"prompt_id": "p", "rewards": [1.0], "correct": [1]}]}, False),
    ("LedgerIngestRequest", {"rows": [{"key": "k", "index": 0, "item": {"domain": "nope", "prompt_id": "p"},
                                       "verdict": {"status": "correct", "reward": 1.0}}]}, False),
])
def test_the_document_states_the_rules_the_server_enforces(component, body, ok):
    assert valid(component, body) is ok


def test_component_names_are_plain():
    """No module path leaks into a name (two models of one name would be spelled `scalerl__...__Name`)."""
    names = list(DOCUMENT["components"]["schemas"])
    assert not [n for n in names if "__" in n], names


PLUGIN = '''
from scalerl.env.contracts.domains import DomainSpec
SPEC = DomainSpec(name="word", reference="answer", description="last word equals the reference",
                  verifier=lambda config: None, trains_by_default=False)
'''


def test_a_plugin_domain_gets_its_own_branch(tmp_path):
    install_word_plugin(tmp_path, PLUGIN)
    code = "import json; from scalerl.env.server.openapi import render; print(render())"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    schemas = json.loads(done.stdout)["components"]["schemas"]
    word = schemas["VerifyItem_word"]
    assert word["properties"]["domain"]["const"] == "word" and "answer" in word["required"]
    assert schemas["VerifyItem"]["discriminator"]["mapping"]["word"].endswith("/VerifyItem_word")
    assert "word" in schemas["RecordedItem"]["properties"]["domain"]["enum"]
