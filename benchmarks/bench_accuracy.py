"""Verdict accuracy on the labelled corpora, per domain and class: the project beside a plain baseline.

`--domain math|code|if|all` (default all). Math, below. Code: `datasets/accuracy/code/items.jsonl` (labels
from a contest judge's rules or the official HumanEval harness, CARD.md), the project's `verify_batch`
beside the plain baseline `judge(item, whole_run=True)` of that folder's `build.py`: each test case in its
own plain `python3` (site included, no sandbox, no per-case limit, the machine's stack), one wall-clock
budget of time_s × cases for all cases together, exit status 0 and stdout tokens (or the returned value)
required; statuses other than correct count as not correct. If: `datasets/accuracy/if/items.jsonl`, the
checker's strict verdict beside IFEval's reference verdict on each decision's response: agreement per
constraint, and the intended differences (docs/domains.md).

Math corpora (`--corpus`): `math` = `datasets/accuracy/math/items.jsonl`, written here with LLM-judge
labels; `real` = `datasets/accuracy/math_real/items.jsonl`, GPT-4 solutions from PRM800K with human
final-answer grades (labels and sources: each folder's CARD.md); or a path. Each item carries its
problem text as `question` (`--no-question` leaves it out), so the answer forms the problem states
are checked. Full solutions are scored as written; bare final answers twice, as written and wrapped
in `\\boxed{}`. Two verifiers side by side in one process: the project (`verifiers.verify_batch`,
default `MathConfig`) and plain math-verify (`verify(parse("$\\boxed{answer}$"), parse(output))`,
its defaults). FN = share of `correct` items not scored correct; FP = share of `wrong` items scored
correct. "hard" = the bare answers of the comparison classes (everything but plain numbers), boxed.
Not a timing benchmark: it reports timeouts, never speed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ACCURACY = Path(__file__).resolve().parent.parent / "datasets" / "accuracy"
CODE_ITEMS = ACCURACY / "code" / "items.jsonl"
IF_ITEMS = ACCURACY / "if" / "items.jsonl"
CORPORA = {"math": ACCURACY / "math" / "items.jsonl", "real": ACCURACY / "math_real" / "items.jsonl"}
COMPARISON_PLAIN = ("plain",)


def rows(path: Path, limit: int = 0) -> list[dict]:
    """The scored rows of the first `limit` items (0: all): bare answers twice, as written and boxed."""
    out = []
    for n, line in enumerate(path.open(encoding="utf-8")):
        if limit and n >= limit:
            break
        item = json.loads(line)
        if item["form"] == "full":
            out.append({**item, "run": "full"})
        else:
            out.append({**item, "run": "bare"})
            out.append({**item, "run": "bare_boxed", "output": f"\\boxed{{{item['output']}}}"})
    return out


def project(items: list[dict], question: bool = True) -> tuple[list[bool], list[str], list[dict]]:
    from scalerl.verifiers import close_default_pools, verify_batch

    # The problem text goes with each item (as `question`), so the forms it states are checked.
    verdicts = verify_batch([{"id": it["id"], "domain": "math", "completion": it["output"],
                              "answer": it["answer"], "question": (it.get("problem") or None) if question else None}
                             for it in items])
    close_default_pools()
    return ([v.status.value == "correct" for v in verdicts], [v.status.value for v in verdicts],
            [v.details for v in verdicts])


def plain(items: list[dict]) -> list[bool]:
    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    out = []
    for it in items:
        try:
            out.append(bool(verify(parse(f"$\\boxed{{{it['answer']}}}$"), parse(it["output"]))))
        except Exception:  # a math-verify failure is a "not correct" verdict for it
            out.append(False)
    return out


def rates(items: list[dict], said: list[bool], select) -> tuple[str, str]:
    pos = [s for it, s in zip(items, said) if select(it) and it["label"] == "correct"]
    neg = [s for it, s in zip(items, said) if select(it) and it["label"] == "wrong"]
    fn = f"{100 * pos.count(False) / len(pos):.1f} % ({pos.count(False)}/{len(pos)})" if pos else "-"
    fp = f"{100 * neg.count(True) / len(neg):.1f} % ({neg.count(True)}/{len(neg)})" if neg else "-"
    return fn, fp


def _of_class(name: str):
    return lambda it: it["class"] == name


def table(items: list[dict], ours: list[bool], base: list[bool]) -> list[str]:
    groups = [
        ("full solutions as written", lambda it: it["run"] == "full"),
        ("bare answers as written", lambda it: it["run"] == "bare"),
        ("bare answers in \\boxed{}, all", lambda it: it["run"] == "bare_boxed"),
        ("hard-to-verify part, boxed", lambda it: it["run"] == "bare_boxed" and it["class"] not in COMPARISON_PLAIN),
        ("all", lambda it: True),
    ]
    if any("boxed" in it for it in items):
        groups += [
            ("full, a `\\boxed{}` in the text", lambda it: it["run"] == "full" and it["boxed"]),
            ("full, no box (`# Answer` only)", lambda it: it["run"] == "full" and not it["boxed"]),
        ]
    classes = sorted({it["class"] for it in items})
    groups += [(f"class `{c}`", _of_class(c)) for c in classes]
    groups += [(f"class `{c}`, full", lambda it, c=c: it["class"] == c and it["run"] == "full") for c in classes]
    lines = ["| items | FN project | FN math-verify | FP project | FP math-verify |", "|---|---|---|---|---|"]
    for name, select in groups:
        (fn_o, fp_o), (fn_b, fp_b) = rates(items, ours, select), rates(items, base, select)
        lines.append(f"| {name} | {fn_o} | {fn_b} | {fp_o} | {fp_b} |")
    return lines


def accuracy_code(args: argparse.Namespace) -> None:
    """The code corpus: FN/FP per class, the project beside the plain baseline (module docstring)."""
    import importlib.util

    from scalerl.verifiers import close_default_pools, verify_batch

    spec = importlib.util.spec_from_file_location("code_corpus_build", CODE_ITEMS.parent / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    items = [json.loads(line) for line in CODE_ITEMS.open(encoding="utf-8")]
    for it in items:  # a judge's timeout is a rejection like a wrong answer: both are negatives here
        it["label"] = "correct" if it["label"] == "correct" else "wrong"
    verdicts = verify_batch([{"domain": "code", **{k: it[k] for k in ("id", "completion", "tests", "limits")}}
                             for it in items])
    close_default_pools()
    ours = [v.status.value == "correct" for v in verdicts]
    base = [build.judge(it, whole_run=True) == "correct" for it in items]
    print(f"code: {len(items)} items from {CODE_ITEMS.parent.name}/{CODE_ITEMS.name}; "
          f"load average {os.getloadavg()[0]:.2f}")
    groups = [("all", lambda it: True), ("hand-written", build.hand_written),
              ("real HumanEval samples", lambda it: not build.hand_written(it))]
    groups += [(f"class `{c}`", _of_class(c)) for c in sorted({it["class"] for it in items})]
    print("| items | FN project | FN plain python3 | FP project | FP plain python3 |\n|---|---|---|---|---|")
    for name, select in groups:
        (fn_o, fp_o), (fn_b, fp_b) = rates(items, ours, select), rates(items, base, select)
        print(f"| {name} | {fn_o} | {fn_b} | {fp_o} | {fp_b} |")
    statuses = [v.status.value for v in verdicts]
    print(f"project: sandbox errors {statuses.count('error')}, timeouts {statuses.count('timeout')}")


def accuracy_if(args: argparse.Namespace) -> None:
    """The IF decisions: the checker's strict verdict beside IFEval's reference verdict (module docstring)."""
    from scalerl.verifiers.ifeval.constraints import arguments, followed

    items = [json.loads(line) for line in IF_ITEMS.open(encoding="utf-8")]
    print(f"if: {len(items)} decision items from {IF_ITEMS.parent.name}/{IF_ITEMS.name}")
    print("| constraint | items | agree now | agreed before | intended differences |\n|---|---|---|---|---|")
    by_constraint: dict[str, list[tuple[bool, bool, bool]]] = defaultdict(list)
    for it in items:
        ours = followed(it["constraint"], it["response"], arguments(it["constraint"], it["kwargs"]), "strict")
        by_constraint[it["constraint"]].append((ours == it["reference"], it["before"] == it["reference"],
                                                it["decision"] == "intended"))
    for name, rows_ in sorted(by_constraint.items()) + [("all", [r for v in by_constraint.values() for r in v])]:
        print(f"| `{name}` | {len(rows_)} | {sum(r[0] for r in rows_)} | {sum(r[1] for r in rows_)} "
              f"| {sum(r[2] for r in rows_)} |")
    random_agreement(followed, arguments)


def random_agreement(followed, arguments) -> None:
    """The checker beside the reference's verdicts on the seeded random responses (datasets/accuracy/if)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("if_random", IF_ITEMS.parent / "random_responses.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    packed = json.loads((IF_ITEMS.parent / "random_verdicts.json").read_text())
    agree: dict[str, list[bool]] = defaultdict(list)
    for item, reference in zip(module.generate(packed["count"], packed["seed"]), packed["reference"]):
        ours = followed(item["constraint"], item["response"], arguments(item["constraint"], item["kwargs"]))
        agree[item["constraint"]].append(str(int(ours)) == reference)
    every = [a for v in agree.values() for a in v]
    print(f"if: {len(every)} random responses, agreement with the reference {sum(every)}/{len(every)}; "
          "constraints with a disagreement:",
          {name: f"{sum(v)}/{len(v)}" for name, v in sorted(agree.items()) if not all(v)})


def benches() -> dict:
    """Each installed domain (the registry's order) that has a bench here: the function `accuracy_<domain>`."""
    from scalerl.env.contracts.domains import domain_names

    return {name: globals()[f"accuracy_{name}"] for name in domain_names() if f"accuracy_{name}" in globals()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--domain", choices=(*benches(), "all"), default="all")
    ap.add_argument("--corpus", default="math", help="math: math | real | a path to an items.jsonl")
    ap.add_argument("--limit", type=int, default=0, help="math: score the first N items only (0: all)")
    ap.add_argument("--misses", action="store_true", help="math: print the project's wrong verdicts")
    ap.add_argument("--no-question", action="store_true",
                    help="math: score without the problem text (no answer-form rules), as a caller that omits it")
    args = ap.parse_args()
    for name, bench in benches().items():
        if args.domain in (name, "all"):
            bench(args)


def accuracy_math(args: argparse.Namespace) -> None:
    corpus = CORPORA.get(args.corpus) or Path(args.corpus)
    items = rows(corpus, args.limit)
    ours, statuses, details = project(items, question=not args.no_question)
    base = plain(items)
    print(f"{len(items)} scored rows from {corpus.parent.name}/{corpus.name}; load average {os.getloadavg()[0]:.2f}")
    print("\n".join(table(items, ours, base)))
    left_out = sum(it["label"] not in ("correct", "wrong") for it in items)
    if left_out:
        print(f"{left_out} rows labelled ambiguous are left out of FN and FP (see the corpus CARD.md)")
    by_rule: dict[str, int] = defaultdict(int)
    for said, d in zip(ours, details):
        if said:
            by_rule[d.get("rule") or d.get("path") or "?"] += 1
    refused = defaultdict(int)
    for d in details:
        if str(d.get("rule", "")).startswith("form_"):
            refused[d["rule"]] += 1
    print(f"timeouts {statuses.count('timeout')}, errors {statuses.count('error')}; "
          f"correct verdicts by rule: {dict(sorted(by_rule.items()))}; "
          f"refused by a form the question states: {dict(sorted(refused.items()))}")
    if args.misses:
        for it, said, st, d in zip(items, ours, statuses, details):
            if it["label"] in ("correct", "wrong") and said != (it["label"] == "correct"):
                print(f"MISS {it['id']} {it['run']} {it['class']} label={it['label']} status={st} "
                      f"gold={it['answer']!r} extracted={d.get('extracted')!r}")


if __name__ == "__main__":
    main()
