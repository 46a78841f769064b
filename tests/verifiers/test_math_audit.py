"""`scalerl.verifiers.math.audit` and `scalerl-env verify --audit`: disputes between strict and default
extraction, and between the fast path and sympy, reported per item; agreeing items report nothing."""

from __future__ import annotations

import json

from scalerl.env.contracts.records import VerifyItem
from scalerl.verifiers.math.audit import audit
from scalerl.verifiers.verifier_config import MathConfig
from typer.testing import CliRunner


def item(i: str, completion: str, answer: str) -> VerifyItem:
    return VerifyItem(id=i, domain="math", completion=completion, answer=answer)


def test_extraction_disputes_are_reported_and_agreement_is_not():
    disputes = audit([item("a", "The answer is 42.", "42"), item("b", "so \\boxed{41}", "41")])
    assert [(d.id, d.kind, d.first, d.second) for d in disputes] == [("a", "extraction", "phrase: 42", "no_answer")]


def test_fast_path_against_sympy_is_checked_per_item():
    # With the shape rules off, sympy reads `30^\circ` as 30; the fast path defers degrees-vs-pi, so
    # no dispute. A decided pair that sympy agrees with gives none either.
    items = [item("c", "\\boxed{30^\\circ}", "\\frac{\\pi}{6}"), item("d", "\\boxed{7}", "8")]
    assert audit(items, MathConfig(shape_rules=False)) == []


def test_cli_audit_prints_disputes(tmp_path):
    from scalerl.env.cli import build_app

    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps({"id": "a", "domain": "math", "completion": "#### 42", "answer": "42"}) + "\n")
    args = ["verify", "--file", str(path), "--out", str(tmp_path / "v.jsonl"), "--audit"]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output
    assert '"kind": "extraction"' in result.output and "audit: 1 disputes" in result.output
