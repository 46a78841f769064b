"""schemathesis hooks for `tests/env/test_server_fuzz.py`: the rules the OpenAPI document states in words.

JSON Schema states a field's type and bounds and, in the document, the rules between fields that it can
(`scalerl.env.server.openapi_rules`: a reference per domain, parquet or records). A few rules it cannot
state; the document writes them in the field's description, and here every generated request that
schemathesis calls valid (positive mode) is made to keep them, one function per rule, so the positive
check tests what the document says. Negative cases are left as generated: they must be refused anyway.
SQL is not repaired: the test lets a valid-schema query get 400 (SQL the ledger cannot run).
"""

from __future__ import annotations

from typing import Any

import schemathesis
from scalerl.env.contracts.domains import domain

# A reference each domain with a reference check can read (the check decides, not this list).
READABLE = {"if": '{"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}'}
CODE_LABEL = {"kind": "stdio", "cases": [{"input": "", "output": "1"}]}


def readable_references(items: list[Any]) -> None:
    """items.N.answer/tests: "a reference its domain cannot read is refused" (the domain's check)."""
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("domain"), str):
            continue
        spec = domain(item["domain"])
        value = item.get(spec.reference)
        if spec.check_reference is None or value is None:
            continue
        try:
            spec.check_reference(value)
        except ValueError:
            item[spec.reference] = READABLE[spec.name]


def same_lengths(body: dict[str, Any]) -> None:
    """/get_reward: prompts and labels have as many entries as query; an object label is a code spec."""
    prompts = body.get("prompts")
    n = min(len(body["query"]), len(body["labels"]), *([] if prompts is None else [len(prompts)]))
    body["query"], body["labels"] = body["query"][:n], body["labels"][:n]
    if prompts is not None:
        body["prompts"] = prompts[:n]
    body["labels"] = [CODE_LABEL if isinstance(label, dict) else label for label in body["labels"]]


def registrable(body: dict[str, Any]) -> None:
    """/v1/curriculum/sets: prompt ids unique; weights name the set's training domains (none: equal);
    `curriculum` holds `scalerl train`'s curriculum.* settings (none: the defaults)."""
    body["domain_weights"], body["curriculum"] = {}, {}
    records = body.get("records")
    if isinstance(records, list):
        seen: set[str] = set()
        body["records"] = [r for r in records if r["prompt_id"] not in seen and not seen.add(r["prompt_id"])]
        readable_references([r for r in body["records"] if r.get("prompt") is not None])


def rank_below_world_size(body: dict[str, Any]) -> None:
    """/draw: rank is 0 .. world_size - 1."""
    body["rank"] = int(body.get("rank", 0)) % int(body.get("world_size", 1))


def flags_per_reward(body: dict[str, Any]) -> None:
    """/report: `correct`, when given, has one flag per reward."""
    for group in body["groups"]:
        if group.get("correct") is not None:
            flags = group["correct"]
            group["correct"] = (flags + [False] * len(group["rewards"]))[:len(group["rewards"])]


RULES = {
    ("POST", "/v1/verify"): lambda body: readable_references(body["items"]),
    ("POST", "/get_reward"): same_lengths,
    ("POST", "/v1/episodes"): lambda body: readable_references([body["problem"]]),
    ("POST", "/v1/curriculum/sets"): registrable,
    ("POST", "/v1/curriculum/sets/{name}/draw"): rank_below_world_size,
    ("POST", "/v1/curriculum/sets/{name}/report"): flags_per_reward,
}


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    rule = RULES.get((case.method.upper(), case.operation.path))
    meta = case.meta
    if rule is not None and meta is not None and meta.generation.mode.is_positive and isinstance(case.body, dict):
        rule(case.body)
    return case
