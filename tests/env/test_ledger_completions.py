"""`ledger.store_completions` on the recording paths: the reward server's `/v1/verify` (with and without an
`Idempotency-Key`) and a training run's ledger keep the completion text only when told to, and every
verdict they record carries its verifier version and settings digest."""

from __future__ import annotations

import httpx
import pytest
from scalerl.curriculum.ledger.ledger_config import LedgerConfig
from scalerl.curriculum.ledger.retirement import RetirementConfig
from scalerl.curriculum.ledger.store import Ledger
from scalerl.env.contracts.config_loader import load_config
from scalerl.env.contracts.records import ProblemRecord
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.distributed.components import make_components
from scalerl.verifiers.batch import VerifierPool

from tests.support.server_harness import ServerProcess


def verify(url: str, completion: str, key: str | None) -> None:
    item = {"id": "x", "domain": "math", "completion": completion, "answer": "1", "prompt_id": "p"}
    headers = {"Idempotency-Key": key} if key else {}
    response = httpx.post(url + "/v1/verify", json={"items": [item]}, headers=headers, timeout=60)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("store", [False, True])
def test_the_server_keeps_completions_only_with_the_setting(tmp_path, store):
    path = tmp_path / "ledger.duckdb"
    server = ServerProcess("--ledger", str(path), "--set", f"ledger_settings.store_completions={str(store).lower()}")
    server.start()
    try:
        verify(server.url, "\\boxed{1}", None)
        verify(server.url, "\\boxed{2}", "key-1")  # the insert-once path
    finally:
        server.stop()
    with Ledger(path, read_only=True) as ledger:
        rows = ledger.query("SELECT status, completion, verifier_version IS NOT NULL, settings_digest IS NOT NULL "
                            "FROM attempts ORDER BY attempt_id").rows
    kept = ["\\boxed{1}", "\\boxed{2}"] if store else [None, None]
    assert rows == [["correct", kept[0], True, True], ["wrong", kept[1], True, True]]


def test_a_run_ledger_follows_the_run_setting(tmp_path):
    cfg = load_config(TrainConfig, None, ["ledger.store_completions=true"])
    assert load_config(TrainConfig, None, []).ledger == LedgerConfig()  # off unless asked
    parts = make_components(cfg.ray, cfg.engine_spec(), tmp_path)
    ledger = parts.ledger(tmp_path / "ledger.duckdb", RetirementConfig(), cfg.ledger)
    try:
        with VerifierPool(cfg.verifier) as pool:
            problem = ProblemRecord(prompt_id="p", domain="math", source="t", answer="1",
                                    prompt=[{"role": "user", "content": "1?"}])
            item = problem.verify_item("\\boxed{1}", step=1)
            ledger.record([item], pool.verify_batch([item]), step=1)
        assert ledger.query("SELECT completion, verifier_version LIKE 'scalerl-%' FROM attempts").rows == [
            ["\\boxed{1}", True]]
    finally:
        ledger.close()
