"""`scalerl-env verify --out` output is ingestible by `scalerl-env ledger ingest` as it is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "scalerl.env.cli"]


def test_verify_output_ingests_into_ledger(tmp_path: Path):
    items = [
        {"id": "a", "domain": "math", "completion": "\\boxed{4}", "answer": "4", "prompt_id": "p1", "step": 3,
         "sample_index": 0},
        {"id": "b", "domain": "math", "completion": "\\boxed{5}", "answer": "4", "prompt_id": "p1", "step": 3,
         "sample_index": 1},
        {"id": "c", "domain": "math", "completion": "\\boxed{7}", "answer": "7"},
    ]
    src, out, ledger = tmp_path / "items.jsonl", tmp_path / "verdicts.jsonl", tmp_path / "l.duckdb"
    src.write_text("".join(json.dumps(i) + "\n" for i in items))
    subprocess.run([*CLI, "verify", "--file", str(src), "--out", str(out)], check=True, capture_output=True)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [ln.get("prompt_id") for ln in lines] == ["p1", "p1", None]
    assert lines[0]["domain"] == "math" and lines[0]["step"] == 3 and lines[1]["sample_index"] == 1

    with_pid = tmp_path / "with_pid.jsonl"
    with_pid.write_text("".join(json.dumps(ln) + "\n" for ln in lines if "prompt_id" in ln))
    subprocess.run([*CLI, "ledger", "ingest", "--ledger", str(ledger), "--file", str(with_pid),
                    "--allow-unknown"], check=True, capture_output=True)
    res = subprocess.run([*CLI, "ledger", "query", "SELECT attempts, correct FROM pass_rates", "--ledger",
                          str(ledger), "--format", "json"], check=True, capture_output=True, text=True)
    rows = json.loads(res.stdout)
    assert rows == {"columns": ["attempts", "correct"], "rows": [[2, 1]]}
