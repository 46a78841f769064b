"""Every source's rows on its fixture (shaped like the real dataset); ids stable across runs and orders."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml
from scalerl.env.contracts.domains import domain
from scalerl.env.contracts.records import AssertTests, FunctionalTests, ProblemRecord, StdioTests
from scalerl.env.sources.manifest import (
    DATASETS_DIR,
    FIXTURE_DIR,
    MANIFEST_DIR,
    ManifestError,
    fixture_path,
    list_sources,
    load_manifest,
)
from scalerl.env.sources.prepare import prepare
from scalerl.env.sources.rows import row_record

MATH_SOURCES = ["polaris", "deepmath", "deepscaler", "openr1-math", "math", "math500", "gsm8k"]
CODE_SOURCES = ["deepcoder", "taco", "apps", "codecontests", "livecodebench", "humaneval", "mbpp",
                "mbpp-sanitized"]
EXPECTED_SKIPS = {"openr1-math": 1}  # its fixture has one proof row (answer "proof"), as the real data


def _prepare_fixture(name: str, **kw):
    manifest = load_manifest(name)
    files = {(None if c == "default" else c): [fixture_path(manifest, c)] for c in manifest.fixtures}
    return prepare(manifest, files=files, **kw)


def test_datasets_folder_is_not_a_package():
    assert not list(DATASETS_DIR.rglob("__init__.py"))


def test_every_required_source_has_a_manifest_and_fixture():
    assert set(MATH_SOURCES + CODE_SOURCES) <= set(list_sources())
    for name in list_sources():
        manifest = load_manifest(name)
        assert manifest.name == name
        assert manifest.fixtures, name
        for file in manifest.fixtures.values():
            assert (FIXTURE_DIR / file).is_file(), file


@pytest.mark.parametrize("name", MATH_SOURCES)
def test_math_adapter_on_fixture(name):
    result = _prepare_fixture(name)
    assert len(result.errors) == EXPECTED_SKIPS.get(name, 0), [str(e) for e in result.errors]
    assert result.records and all(isinstance(r, ProblemRecord) for r in result.records)
    for record in result.records:
        assert record.domain == "math" and record.source == name and record.answer
        assert record.prompt[-1].role == "user"
        assert record.prompt[-1].content.endswith("\n\n" + domain("math").prompt.instruction)  # the spec's
        assert record.metadata["solution"]


@pytest.mark.parametrize("name", CODE_SOURCES)
def test_code_adapter_on_fixture(name):
    result = _prepare_fixture(name)
    assert result.errors == [], [str(e) for e in result.errors]
    assert result.records
    for record in result.records:
        assert record.domain == "code" and isinstance(record.tests, (StdioTests, FunctionalTests, AssertTests))
        assert "```python" in record.prompt[-1].content


def test_deepcoder_reads_both_test_layouts():
    result = _prepare_fixture("deepcoder")
    by_config = {}
    for record in result.records:
        by_config.setdefault(record.metadata["config"], []).append(record)
    assert set(by_config) == {"primeintellect", "taco", "lcbv5", "codeforces"}
    kinds = {c: {r.tests.kind for r in rs} for c, rs in by_config.items()}
    assert kinds["taco"] == {"stdio", "functional"}  # dict-of-lists layout, with and without fn_name
    assert kinds["primeintellect"] == {"stdio", "functional"}  # list-of-tests layout


def test_difficulty_priors_are_pass_rates():
    polaris = {r.metadata["difficulty_raw"]: r.difficulty_prior for r in _prepare_fixture("polaris").records}
    assert polaris == {"7/8": 0.875, "8/8": 1.0, "3/8": 0.375, "0/8": 0.0}
    deepmath = {r.metadata["difficulty_raw"]: r.difficulty_prior for r in _prepare_fixture("deepmath").records}
    assert deepmath == {4.0: 0.65, 2.5: 0.8, 9.0: 0.15}  # level L of 10 -> 1 - (L - 0.5) / 10
    math_levels = {r.metadata["difficulty_raw"]: r.difficulty_prior for r in _prepare_fixture("math").records}
    assert all(0.0 < p < 1.0 for p in math_levels.values())
    assert math_levels["Level 2"] == pytest.approx(0.7)


def test_gsm8k_answer_is_the_number_after_hashes_without_separators():
    records = _prepare_fixture("gsm8k").records
    assert records[0].answer == "18"
    with_commas = [r for r in records if "," in r.metadata["solution"].rsplit("boxed", 1)[-1]]
    assert with_commas and all("," not in r.answer for r in with_commas)


def test_math_answer_from_boxed_solution():
    records = _prepare_fixture("math").records
    assert records[0].answer == "\\left( 3, \\frac{\\pi}{2} \\right)"


def test_prompt_ids_are_stable_across_runs_and_orderings(tmp_path: Path):
    rows = [json.loads(line) for line in (FIXTURE_DIR / "gsm8k.jsonl").read_text().splitlines()]
    shuffled = tmp_path / "shuffled.jsonl"
    random.Random(0).shuffle(rows)
    shuffled.write_text("".join(json.dumps(r) + "\n" for r in rows))
    manifest = load_manifest("gsm8k")
    ids_a = {r.prompt_id: r.answer for r in _prepare_fixture("gsm8k").records}
    ids_b = {r.prompt_id: r.answer for r in prepare(manifest, files=[shuffled]).records}
    assert ids_a == ids_b
    # pinned: the id of GSM8K test row 1 must never change (ledger history is keyed by it)
    assert _prepare_fixture("gsm8k").records[0].prompt_id == "11495f9d12e5e47a"


def test_instruction_does_not_change_the_prompt_id():
    manifest = load_manifest("polaris")
    row = json.loads((FIXTURE_DIR / "polaris.jsonl").read_text().splitlines()[0])
    plain = row_record(manifest, row)
    custom = row_record(manifest.model_copy(update={"instruction": "Answer in \\boxed{}."}), row)
    assert plain.prompt_id == custom.prompt_id
    assert [m.role for m in custom.prompt] == ["user"]  # the system message is the renderer's (prompts.<domain>)
    assert custom.prompt[-1].content.endswith("Answer in \\boxed{}.")
    assert not plain.prompt[-1].content.endswith("Answer in \\boxed{}.")


def test_code_rows_say_what_to_write_by_test_kind():
    """The instruction names the function under test, or a stdin/stdout program (the code spec's)."""
    from scalerl.env.domains.code import FUNCTION_INSTRUCTION, STDIO_INSTRUCTION

    records = _prepare_fixture("taco").records
    by_kind = {r.tests.kind: r.prompt[-1].content for r in records}
    assert by_kind["stdio"].endswith(STDIO_INSTRUCTION)
    functional = next(r for r in records if r.tests.kind == "functional")
    assert by_kind["functional"].endswith(FUNCTION_INSTRUCTION.format(entry_point=f"`{functional.tests.entry_point}`"))


def test_an_unknown_converter_is_refused_when_the_manifest_loads(tmp_path: Path):
    data = yaml.safe_load((MANIFEST_DIR / "apps.yaml").read_text())
    path = tmp_path / "apps.yaml"
    path.write_text(yaml.safe_dump({**data, "converter": "from_nowhere"}))
    with pytest.raises(ManifestError, match="from_nowhere.*known: from_apps"):
        load_manifest(path)


def test_duplicates_are_dropped_and_counted(tmp_path: Path):
    line = (FIXTURE_DIR / "polaris.jsonl").read_text().splitlines()[0]
    path = tmp_path / "dups.jsonl"
    path.write_text(f"{line}\n{line}\n{line}\n")
    result = prepare(load_manifest("polaris"), files=[path])
    assert len(result.records) == 1 and result.duplicates == 2 and result.rows_read == 3


def test_limit_reads_at_most_n_rows():
    result = prepare(load_manifest("math500"), files=[fixture_path(load_manifest("math500"))], limit=2)
    assert result.rows_read == 2 and len(result.records) == 2


def test_fixture_gold_answers_score_correct_through_the_verifiers():
    """Every fixture row with a reference (answer, worked solution, reference program) checks `correct`."""
    from scalerl.env.sources.prepare import check_records

    records = [r for name in MATH_SOURCES + CODE_SOURCES for r in _prepare_fixture(name).records]
    report = check_records(records)
    assert report.failures == [], report.failures
    unchecked = {r.source for r in records if "solution" not in r.metadata}
    # LiveCodeBench and DeepCoder's lcbv5/codeforces ship no reference programs; the third CodeContests
    # fixture row has only a C++ solution (no PYTHON3 one to run)
    assert unchecked == {"livecodebench", "deepcoder", "codecontests"}
    assert report.unchecked == 6 and report.checked == len(records) - 6
