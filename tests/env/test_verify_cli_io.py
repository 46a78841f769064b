"""`scalerl-env verify`'s I/O: the verdict lines carry field for field (values, key order) what
`Verdict.model_dump(mode="json")` and `json.dumps` wrote, in UTF-8, through both outputs (file, stdout); on
a terminal the file is still scored in one batch."""

from __future__ import annotations

import json

from scalerl.env.cli import build_app
from scalerl.env.commands.verify import CONTEXT_FIELDS, read_items, score, verdict_lines
from scalerl.env.contracts.records import Status, Verdict, VerifyItem
from scalerl.verifiers import VerifierPool
from scalerl.verifiers.verifier_config import VerifierConfig
from typer.testing import CliRunner

ITEMS = [
    {"id": "a", "domain": "math", "completion": "so \\boxed{\\frac{1}{2}}", "answer": "0.5"},
    {"id": "b", "domain": "math", "completion": "donc \\boxed{√2 ≤ 3}", "answer": "8", "prompt_id": "p1",
     "step": 3, "policy_version": 2, "sample_index": 0, "truncated": False, "completion_tokens": 17},
    {"id": "c", "domain": "if", "completion": "ПРИВЕТ", "answer": '{"func_name": "validate_uppercase"}',
     "prompt_id": "p2", "step": 0},
]
VERDICTS = [
    Verdict.of(Status.correct, details={"extracted": "\\frac{1}{2}", "path": "fast", "rule": "fast_path",
                                        "verifier_version": "math-1", "settings_digest": "ab12"},
               elapsed_s=1.25e-05, id="a"),
    Verdict.of(Status.wrong, details={"extracted": "√2 ≤ 3", "deduplicated": True, "second_opinion": "rejects",
                                      "nested": [{"status": "x", "n": None}, (1, 2.5)], "ratio": 1 / 3},
               elapsed_s=0.5, id="b"),
    Verdict.of(Status.no_answer, details={}, id="c"),
]


def old_line(item: VerifyItem, verdict: Verdict) -> dict:
    """What the command wrote before serialization moved to pydantic-core (the reference)."""
    line = verdict.model_dump(mode="json", include={"id", "status", "reward", "details", "elapsed_s"})
    if item.prompt_id is not None:
        line["domain"] = item.domain
        line.update({k: getattr(item, k) for k in CONTEXT_FIELDS if getattr(item, k) is not None})
    return json.loads(json.dumps(line))


def test_verdict_lines_equal_the_model_dump_lines_field_for_field_and_in_order():
    items = [VerifyItem.model_validate(row) for row in ITEMS]
    data = verdict_lines(items, VERDICTS)
    lines = data.decode("utf-8").splitlines()
    assert len(lines) == len(items) and data.endswith(b"\n")
    for line, item, verdict in zip(lines, items, VERDICTS):
        new, old = json.loads(line), old_line(item, verdict)
        assert list(new.items()) == list(old.items())  # values and key order
    assert "√2 ≤ 3" in lines[1]  # UTF-8, not \u escapes


def test_read_items_reads_what_it_read_before(tmp_path):
    path = tmp_path / "i.jsonl"
    path.write_bytes(("\n".join(json.dumps(row, ensure_ascii=False) for row in ITEMS) + "\r\n\n").encode())
    assert read_items(str(path)) == [VerifyItem.model_validate(row) for row in ITEMS]


def test_cli_writes_utf8_lines_to_the_file_and_to_stdout(tmp_path):
    source, out = tmp_path / "i.jsonl", tmp_path / "v.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in ITEMS[:2]), encoding="utf-8")
    runner = CliRunner()
    to_file = runner.invoke(build_app(), ["verify", "--file", str(source), "--out", str(out), "--workers", "1"])
    to_stdout = runner.invoke(build_app(), ["verify", "--file", str(source), "--workers", "1"])
    assert to_file.exit_code == 0 and to_stdout.exit_code == 0, to_file.output + to_stdout.output
    from_file = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    from_stdout = [json.loads(line) for line in to_stdout.stdout.splitlines() if line.startswith("{")]
    for lines in (from_file, from_stdout):
        assert [v["id"] for v in lines] == ["a", "b"]
        assert [v["status"] for v in lines] == ["correct", "wrong"]
        assert lines[1]["details"]["extracted"] == "√2 ≤ 3"
        assert {k: lines[1][k] for k in ("domain", "prompt_id", "step", "truncated")} == {
            "domain": "math", "prompt_id": "p1", "step": 3, "truncated": False}


class CountingPool:
    """A real pool that records the size of each batch it is given."""

    def __init__(self, pool: VerifierPool) -> None:
        self.pool, self.batches = pool, []

    def verify_batch(self, items):
        self.batches.append(len(items))
        return self.pool.verify_batch(items)


def test_a_terminal_scores_the_file_in_one_batch():
    texts = ["so \\boxed{x^2+2x+1}", "so \\boxed{x^2+2x}"]
    items = [VerifyItem(id=str(i), domain="math", completion=texts[i % 2], answer="(x+1)^2") for i in range(600)]
    with VerifierPool(VerifierConfig.model_validate({"math": {"workers": 1, "second_opinion": 0}})) as pool:
        counting = CountingPool(pool)
        verdicts = score(counting, items, show_progress=True)
        requests = pool.info()["math"]["requests"]
    assert counting.batches == [600]  # not one batch per 256 items
    assert requests == 2  # each pair once in the whole file
    assert [v.id for v in verdicts] == [item.id for item in items]
    assert [v.status for v in verdicts[:2]] == [Status.correct, Status.wrong]
