"""Offline profiling with the trainer's engine and verifiers (`scalerl profile`), and the band
filter on its ledger (`scalerl-env data filter`)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from scalerl.curriculum.ledger.retirement import RetirementConfig
from scalerl.curriculum.ledger.store import Ledger
from scalerl.env.cli import build_app as env_app
from scalerl.env.contracts.config_loader import load_config
from scalerl.env.sources.generators import generate
from scalerl.env.sources.verl import load_record_file, write_records
from scalerl.trainer.config.data_flags import data_overrides
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.run.profile import profile
from typer.testing import CliRunner

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def math_file(tmp_path):
    path = tmp_path / "math.parquet"
    write_records(generate("math", seed=0, count=6, level=0), path)
    return path


def test_profile_records_n_attempts_per_prompt_and_resumes(tmp_path, math_file):
    # the untrained tiny model (no warm start) is enough to count attempts; the engine, prompt template
    # and verifiers are the trainer's own
    cfg = load_config(TrainConfig, None, [*data_overrides([f"math={math_file}"], [], domains_given=False),
                                          "warm_start.enabled=false", "engine.max_new_tokens=16"])
    ledger_path = tmp_path / "profile.duckdb"
    seen = []
    first = profile(cfg, ledger_path, 3, progress=lambda done, total: seen.append((done, total)))
    assert (first.prompts, first.sampled_prompts, first.attempts_recorded) == (6, 6, 18)
    assert seen[-1] == (6, 6)
    again = profile(cfg, ledger_path, 5)  # resume: only the 2 missing attempts of each prompt
    assert (again.sampled_prompts, again.attempts_recorded) == (6, 12)
    assert profile(cfg, ledger_path, 5).sampled_prompts == 0
    ids = {r.prompt_id for r in load_record_file(math_file)}
    with Ledger(ledger_path, read_only=True) as led:
        assert {pid: r.attempts for pid, r in led.pass_rates().items()} == dict.fromkeys(ids, 5)
        assert led.query("SELECT count(*) FROM attempts WHERE step IS NOT NULL").rows == [[0]]
        assert led.retired_ids() == set()


def test_data_filter_keeps_exactly_the_band(tmp_path, math_file):
    records = load_record_file(math_file)
    passed = [0, 1, 2, 4, 8]  # of 8: pass rates 0, 0.125, 0.25, 0.5, 1.0; the sixth prompt is unprofiled
    ledger_path = tmp_path / "profile.duckdb"
    with Ledger(ledger_path, retirement=RetirementConfig(enabled=False)) as led:
        led.record_attempts([{"prompt_id": r.prompt_id, "domain": "math", "sample_index": i,
                              "status": "correct" if i < n else "wrong"}
                             for r, n in zip(records, passed) for i in range(8)])
    out = tmp_path / "band.parquet"
    result = CliRunner().invoke(env_app(), ["data", "filter", str(math_file), "--ledger", str(ledger_path),
                                            "--pass-rate", "0.125:0.5", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "kept 3 of 6" in result.output and "unprofiled 1 dropped" in result.output
    assert [r.prompt_id for r in load_record_file(out)] == [r.prompt_id for r in records[1:4]]
    assert pq.read_table(out).schema == pq.read_table(math_file).schema
    keep_all = CliRunner().invoke(env_app(), ["data", "filter", str(math_file), "--ledger", str(ledger_path),
                                              "--pass-rate", "0:1", "--keep-unprofiled", "--out", str(out)])
    assert keep_all.exit_code == 0 and len(load_record_file(out)) == 6
    bad = CliRunner().invoke(env_app(), ["data", "filter", str(math_file), "--ledger", str(ledger_path),
                                         "--pass-rate", "0.9:0.1", "--out", str(out)])
    assert bad.exit_code != 0 and "LOW <= HIGH" in bad.output
