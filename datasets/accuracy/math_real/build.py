"""Build `items.jsonl`: real GPT-4 math solutions with human final-answer grades (see CARD.md).

Source: the PRM800K phase-1 test labels (OpenAI, MIT) as redistributed in the stepwise-critique
parquet of the public GitHub repository `xhghhh/Enhancing-PRM800K` (MIT), read straight from a git
snapshot of it; reference answers from `datasets/reference/math500/test.jsonl` (MATH-500, which
holds every phase-1 test problem). One parquet row is one GPT-4 completion of one step, rated by a
human labeller (+1 / 0 / -1); a completion that states a final answer carries it in `answer`.
A -1 on a final step grades the step, not only its answer: where the same labeller rated another
completion with the same answer +1, or the answer is the reference verbatim, the item is kept with
label `ambiguous` (and the reason) and is left out of FN and FP.

Guarantees: deterministic output for the same snapshot blob (its sha is checked); every item is a
GPT-4 completion whose final step a human rated +1 (`correct`) or -1 (`wrong`); rating 0 (neutral)
and unrated rows are dropped. Not guaranteed: that a -1 was given for the stated answer rather than
for the final step's reasoning (see CARD.md, Limits); earlier steps may have been written by the
labeller (`human_steps` counts them).

Rebuild: fetch `github:xhghhh/Enhancing-PRM800K`, then
`python datasets/accuracy/math_real/build.py --git-dir /work/.mirror/xhghhh+Enhancing-PRM800K/repo`.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
MATH500 = HERE.parent.parent / "reference" / "math500" / "test.jsonl"
COMMIT = "5e806449f204352f888b1ccdc7eb3ccda479ad8c"  # branch master of xhghhh/Enhancing-PRM800K
PARQUET = "phase1_test.stepwise-critic.parquet"
BLOB = "aa216a855b4616e6ece48b9a11d84d66815efbdf"  # git blob sha of PARQUET at COMMIT
LABEL = {1.0: "correct", -1.0: "wrong"}

_PLAIN = re.compile(r"^-?\d+(\.\d+)?$")
_WORD = re.compile(r"\\(?:text|textbf|mbox|mathrm)\{")
_RELATION = re.compile(r"\\(?:le|ge|leq|geq|neq)(?![a-zA-Z])")
_LETTER = re.compile(r"(?<!\\)\b[a-zA-Z]\b")


def answer_class(reference: str) -> str:
    """The shape of the reference answer: the class an item is reported under."""
    ref = reference.replace("\\!", "").replace("{,}", "").replace("^\\circ", "").replace("\\$", "")
    ref = ref.replace("\\%", "").strip().strip("$")
    if _PLAIN.match(ref.replace(",", "")) and not re.search(r"\d,\d{1,2}(?!\d)", ref):
        return "plain"
    if _WORD.search(ref):
        return "text"
    if "=" in ref or "<" in ref or ">" in ref or _RELATION.search(ref):
        return "equation"
    if "," in ref or "\\cup" in ref or "\\infty" in ref or "pmatrix" in ref:
        return "tuple_interval"
    bare = re.sub(r"\\[a-zA-Z]+", "", ref)
    if _LETTER.search(bare):
        return "expression"
    return "numeric_expr"


def read_parquet(git_dir: Path):
    import pyarrow.parquet as pq

    blob = subprocess.run(["git", f"--git-dir={git_dir}", "rev-parse", f"{COMMIT}:{PARQUET}"],
                          check=True, capture_output=True, text=True).stdout.strip()
    if blob != BLOB:
        raise SystemExit(f"{PARQUET} at {COMMIT} is blob {blob}, expected {BLOB}")
    data = subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "blob", BLOB],
                          check=True, capture_output=True).stdout
    if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() != BLOB:
        raise SystemExit("blob content does not match its sha")
    return pq.read_table(io.BytesIO(data)).to_pylist()


def references() -> dict[str, dict]:
    out = {}
    for line in MATH500.open(encoding="utf-8"):
        row = json.loads(line)
        out[row["problem"].strip()] = row
    return out


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text).strip("$")


def ambiguity(rows: list[dict], refs: dict[str, dict]):
    """Why a -1 on a final step cannot be read as a grade of its stated answer, or None."""
    graded_right: dict[str, set[str]] = {}
    for r in rows:
        if r["answer"] is not None and r["rating"] == 1.0:
            graded_right.setdefault(r["instruction"], set()).add(_squash(r["answer"]))

    def why(r: dict) -> str | None:
        if r["rating"] != -1.0:
            return None
        if _squash(r["answer"]) in graded_right.get(r["instruction"], set()):
            return "the labeller rated another completion with this answer +1"
        if _squash(r["answer"]) == _squash(refs[r["instruction"].strip()]["answer"]):
            return "the stated answer is the reference verbatim"
        return None

    return why


def build(rows: list[dict], refs: dict[str, dict]) -> list[dict]:
    """One `full` and one `bare` item per rated final-answer completion, in source order."""
    human = {r["next_response"] for r in rows if r["is_human_response"]}
    why = ambiguity(rows, refs)
    items, seen = [], set()
    for r in rows:
        if r["answer"] is None or r["is_human_response"] or r["rating"] not in LABEL:
            continue
        ref = refs[r["instruction"].strip()]
        steps = list(r["responses"]) + [r["next_response"]]
        output = "\n\n".join(s for s in steps if s) + "\n\n# Answer\n\n" + r["answer"]
        key = (r["instruction"], output)
        if key in seen:
            continue
        seen.add(key)
        n = len(seen) - 1
        reason = why(r)
        common = {
            "class": answer_class(ref["answer"]), "shape": "MATH", "problem": r["instruction"],
            "answer": ref["answer"], "label": "ambiguous" if reason else LABEL[r["rating"]],
            "subject": ref["subject"], "level": ref["level"], "unique_id": ref["unique_id"],
            "rating": int(r["rating"]), "is_solution": bool(r["is_solution"]),
            "human_steps": sum(s in human for s in r["responses"]), "boxed": "\\boxed" in output,
            **({"ambiguous": reason} if reason else {}),
        }
        items.append({"id": f"real-{n:04d}-full", "form": "full", "output": output, **common})
        items.append({"id": f"real-{n:04d}-bare", "form": "bare", "output": r["answer"], **common})
    return items


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--git-dir", type=Path, required=True, help="git dir of xhghhh/Enhancing-PRM800K")
    ap.add_argument("--out", type=Path, default=HERE / "items.jsonl")
    args = ap.parse_args()
    items = build(read_parquet(args.git_dir), references())
    with args.out.open("w", encoding="utf-8") as f:
        for it in items:
            f.write(json.dumps(it, ensure_ascii=False) + "\n")
    full = [it for it in items if it["form"] == "full"]
    count = {k: sum(it["label"] == k for it in full) for k in ("correct", "wrong", "ambiguous")}
    print(f"{len(full)} completions {count}, {len(items)} items -> {args.out}")


if __name__ == "__main__":
    main()
