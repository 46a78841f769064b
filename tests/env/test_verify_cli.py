"""`scalerl-env verify`: verdict lines in input order, summary, exit codes, malformed-line messages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from scalerl.env.cli import build_app
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
ITEMS = [
    {"id": "a", "domain": "math", "completion": "so \\boxed{\\frac{1}{2}}", "answer": "0.5"},
    {"id": "b", "domain": "math", "completion": "so \\boxed{7}", "answer": "8"},
    {"id": "c", "domain": "math", "completion": "I give up", "answer": "1"},
    {"id": "d", "domain": "math", "completion": "\\boxed{x^2+2x+1}", "answer": "(x+1)^2"},
]


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def run(args: list[str], stdin: str | None = None):
    return CliRunner().invoke(build_app(), args, input=stdin)


def test_verdicts_in_input_order_with_summary(tmp_path):
    out = tmp_path / "v.jsonl"
    result = run(["verify", "--file", str(write_jsonl(tmp_path / "i.jsonl", ITEMS)), "--out", str(out),
                  "--workers", "1"])
    assert result.exit_code == 0, result.output
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert [v["id"] for v in verdicts] == ["a", "b", "c", "d"]
    assert [v["status"] for v in verdicts] == ["correct", "wrong", "no_answer", "correct"]
    assert set(verdicts[0]) == {"id", "status", "reward", "details", "elapsed_s"}
    assert "accuracy 2/4 = 50.0%" in result.output and "items/s" in result.output


def test_stdin_input_and_stdout_verdicts():
    result = run(["verify", "--file", "-", "--workers", "1"], stdin=json.dumps(ITEMS[1]) + "\n\n")
    assert result.exit_code == 0
    first = json.loads(result.stdout.splitlines()[0])
    assert first["id"] == "b" and first["status"] == "wrong"


def test_malformed_line_names_line_and_field(tmp_path):
    rows = [ITEMS[0], {"id": "x", "domain": "math", "completion": "1"}, ITEMS[1]]
    out = tmp_path / "v.jsonl"
    result = run(["verify", "--file", str(write_jsonl(tmp_path / "i.jsonl", rows)), "--out", str(out)])
    assert result.exit_code == 2
    assert "line 2" in result.output and "answer" in result.output
    assert not out.exists()


def test_invalid_json_and_unknown_field(tmp_path):
    result = run(["verify", "--file", str(write_jsonl(tmp_path / "a.jsonl", [ITEMS[0], "{not json"]))])
    assert result.exit_code == 2 and "line 2" in result.output
    bad = {**ITEMS[0], "colour": "red"}
    result = run(["verify", "--file", str(write_jsonl(tmp_path / "b.jsonl", [bad]))])
    assert result.exit_code == 2 and "line 1: colour" in result.output


def test_missing_file_is_a_clear_error(tmp_path):
    result = run(["verify", "--file", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2 and "nope.jsonl" in result.output


def test_help_shows_an_example():
    result = run(["verify", "--help"])
    assert result.exit_code == 0 and "Example:" in result.output and "scalerl-env verify --file" in result.output


def test_demo_sample_scores_as_shipped(tmp_path):
    """The `make demo` path: the console script on the shipped sample, as a subprocess."""
    out = tmp_path / "demo.jsonl"
    script = Path(sys.executable).with_name("scalerl-env")
    proc = subprocess.run([str(script), "verify", "--file", str(ROOT / "datasets/samples/math_items.jsonl"),
                           "--out", str(out)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    by_id = {v["id"]: v["status"] for v in verdicts}
    assert len(verdicts) == 68 and all(v["status"] != "error" for v in verdicts)
    assert all(s == "correct" for k, s in by_id.items() if k.endswith("#ref"))
    assert all(s == "wrong" for k, s in by_id.items() if k.endswith("#other-answer"))
    assert by_id["adversarial#false-positive"] == "wrong"
    assert "accuracy" in proc.stdout and "correct" in proc.stdout


def test_each_command_module_registers_on_its_own_in_any_order():
    """A command group is registered by its own module, whatever the order of the modules (`data filter`
    once needed `data` registered before it)."""
    from scalerl.env.cli import COMMAND_MODULES, build_typer_app

    modules = [f"scalerl.env.commands.{name}" for name in COMMAND_MODULES]
    for order in (modules, modules[::-1]):
        app = build_typer_app("scalerl-env", "test", tuple(order))
        assert CliRunner().invoke(app, ["data", "filter", "--help"]).exit_code == 0
    for module in modules:
        build_typer_app("scalerl-env", "test", (module,))
    assert "filter" in run(["data", "--help"]).output


def test_help_names_every_built_in_domain():
    assert "domains math, code and if" in " ".join(run(["--help"]).output.split())
    assert "(math, code, if, a plug-in's)" in " ".join(run(["verify", "--help"]).output.split())
