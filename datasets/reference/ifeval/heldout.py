"""Build `heldout.parquet`: the IFEval prompts that `small-cpu` holds out, never trained on.

Of the prompts each of whose instructions can be met within the preset's ~160-token answer (`FITS`
below: "at least 300 words" cannot; 461 of 541), `PROMPTS` drawn by the data layer's seeded splitter
(`split_holdout`, seed 0). Whether the model follows them is not a criterion. Run from the repository
root: `.venv/bin/python datasets/reference/ifeval/heldout.py` (deterministic; a test checks the
committed file against it).
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE, OUT = HERE / "input_data.jsonl", HERE / "heldout.parquet"
PROMPTS = 64  # an evaluation samples every held-out prompt at least once: this bounds its cost
BUDGET_WORDS = 100  # ~130 tokens of English: what a 96-128 + 32-token completion can hold

FITS = {  # instruction -> does this instance fit the budget (default: yes)
    "length_constraints:number_words": lambda k: k["relation"] != "at least" or k["num_words"] <= BUDGET_WORDS,
    "length_constraints:number_sentences": lambda k: k["relation"] != "at least" or k["num_sentences"] <= 6,
    "length_constraints:number_paragraphs": lambda k: k["num_paragraphs"] <= 4,
    "length_constraints:nth_paragraph_first_word": lambda k: k["num_paragraphs"] <= 4,
    "detectable_format:number_bullet_lists": lambda k: k["num_bullets"] <= 6,
    "detectable_format:multiple_sections": lambda k: k["num_sections"] <= 4,
    "detectable_format:number_highlighted_sections": lambda k: k["num_highlights"] <= 4,
    "combination:repeat_prompt": lambda k: len(k["prompt_to_repeat"].split()) <= BUDGET_WORDS // 2,
    "keywords:frequency": lambda k: k["relation"] != "at least" or k["frequency"] <= 5,
}


def fits(row: dict) -> bool:
    return all(FITS.get(name, lambda _: True)(kwargs)
               for name, kwargs in zip(row["instruction_id_list"], row["kwargs"]))


def kept_keys() -> list[int]:
    """The IFEval `key`s kept, in file order."""
    rows = [json.loads(line) for line in SOURCE.read_text().splitlines()]
    return [row["key"] for row in rows if fits(row)]


def select() -> list:
    """The held-out records: `PROMPTS` of the fitting prompts, drawn by `split_holdout` (seed 0)."""
    from scalerl.env.sources.manifest import load_manifest
    from scalerl.env.sources.prepare import prepare, split_holdout

    keys = set(kept_keys())
    fitting = [r for r in prepare(load_manifest("ifeval"), files=[SOURCE]).records if r.metadata["row_id"] in keys]
    return split_holdout(fitting, PROMPTS, seed=0)[1]


def main() -> None:
    from scalerl.env.sources.verl import write_records

    write_records(select(), OUT)


if __name__ == "__main__":
    main()
