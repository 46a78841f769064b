"""`scalerl-env ledger rescore` on the ledger of a real short run (CPU default: tiny model, cached warm start,
real verifiers) with `ledger.store_completions` on, after a verifier change: the flips it reports are
exactly the attempts whose new verdict differs from the original, per domain and rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from scalerl.env.contracts.config_loader import load_config
from scalerl.trainer.config.train import TrainConfig

BIN = Path(sys.executable).parent
SHORT = ["pipeline.max_steps=3", "pipeline.k=1", "pipeline.prompts_per_step=8", "pipeline.samples_per_prompt=8",
         "pipeline.max_time_s=null", "validation.enabled=false", "checkpoint.every_steps=100",
         "logging.progress=lines", "ledger.store_completions=true"]
# a verdict-changing setting: an extracted answer longer than one character is unparsable, so every correct
# answer of two or more characters flips to wrong (the tiny model boxes every answer)
CHANGE = ["math.max_answer_chars=1"]

pytestmark = pytest.mark.timeout(2400)

# the flips the rescore must report, computed from the two tables it leaves (the accepting verdict's rule)
FLIPS_SQL = """
SELECT a.domain, coalesce(CASE WHEN a.correct THEN a.rule ELSE r.rule END, '(none)') AS rule,
       count(*) FILTER (WHERE a.correct AND NOT r.correct) AS correct_to_wrong,
       count(*) FILTER (WHERE r.correct AND NOT a.correct) AS wrong_to_correct
FROM attempts a JOIN rescores r USING (attempt_id) WHERE a.correct <> r.correct GROUP BY ALL"""


def test_rescore_of_a_run_ledger_reports_the_flips_the_tables_show(tmp_path):
    from scalerl.trainer.run.loop import train

    run = tmp_path / "run"
    train(load_config(TrainConfig, None, SHORT), run)
    ledger = run / "ledger.duckdb"
    with duckdb.connect(str(ledger), read_only=True) as con:
        before = con.execute("SELECT * FROM attempts ORDER BY attempt_id").fetchall()
        [original] = con.execute("SELECT DISTINCT verifier_version, settings_digest FROM attempts "
                                 "WHERE domain = 'math'").fetchall()
        by_domain = dict(con.execute("SELECT domain, count(*) FROM attempts GROUP BY 1").fetchall())
        unstamped = con.execute("SELECT count(*) FROM attempts WHERE completion IS NULL OR verifier_version IS NULL "
                                "OR settings_digest IS NULL").fetchone()[0]
    assert unstamped == 0 and sum(by_domain.values()) == 3 * 8 * 8
    done = subprocess.run([str(BIN / "scalerl-env"), "ledger", "rescore", "--ledger", str(ledger), "--json", *CHANGE],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["domains"]
    with duckdb.connect(str(ledger), read_only=True) as con:
        assert con.execute("SELECT * FROM attempts ORDER BY attempt_id").fetchall() == before
        flips = con.execute(FLIPS_SQL).fetchall()
        long_correct = con.execute("SELECT count(*) FROM attempts JOIN problems USING (prompt_id) WHERE "
                                   "attempts.domain = 'math' AND correct AND length(answer) > 1").fetchone()[0]
        same = dict(con.execute("SELECT a.domain, count(*) FROM attempts a JOIN rescores r USING (attempt_id) "
                                "WHERE a.correct = r.correct GROUP BY 1").fetchall())
    expected: dict[str, dict[str, dict[str, int]]] = {}
    for domain, rule, c2w, w2c in flips:
        expected.setdefault(domain, {})[rule] = {"correct_to_wrong": c2w, "wrong_to_correct": w2c}
    for domain, n in by_domain.items():
        got = report[domain]
        assert (got["rescored"], got["no_completion"], got["no_reference"]) == (n, 0, 0)
        assert got["unchanged"] == same.get(domain, 0)
        assert got["by_rule"] == expected.get(domain, {})
        assert got["correct_to_wrong"] == sum(f["correct_to_wrong"] for f in got["by_rule"].values())
    math = report["math"]
    assert long_correct > 0 and math["correct_to_wrong"] == long_correct and math["wrong_to_correct"] == 0
    assert (math["verifier_version"], math["settings_digest"]) != original  # same code, another digest
    assert math["verifier_version"] == original[0]
