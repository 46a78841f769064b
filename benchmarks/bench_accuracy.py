"""Math verdict accuracy on the labelled corpora: false negatives and false positives per class.

Corpora (`--corpus`): `math` = `datasets/accuracy/math/items.jsonl`, written here with LLM-judge
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
CORPORA = {"math": ACCURACY / "math" / "items.jsonl", "real": ACCURACY / "math_real" / "items.jsonl"}
COMPARISON_PLAIN = ("plain",)


def rows(path: Path) -> list[dict]:
    out = []
    for line in path.open(encoding="utf-8"):
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="math", help="math | real | a path to an items.jsonl")
    ap.add_argument("--misses", action="store_true", help="print the project's wrong verdicts")
    ap.add_argument("--no-question", action="store_true",
                    help="score without the problem text (no answer-form rules), as a caller that omits it")
    args = ap.parse_args()
    corpus = CORPORA.get(args.corpus) or Path(args.corpus)
    items = rows(corpus)
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
