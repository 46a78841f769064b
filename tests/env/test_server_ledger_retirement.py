"""The server ledger's retirement rule is a server setting (`ledger_retirement.*`): with one sample per
request (veRL scores one sample per call), the default latest-group window retires a prompt on its first
correct sample; `window=all, min_samples=G` waits for G scored samples."""

from __future__ import annotations

import httpx
import pytest

from tests.support.server_harness import ServerProcess


def one_correct_sample(url: str, i: int) -> None:
    item = {"id": f"s{i}", "domain": "math", "completion": "\\boxed{1}", "answer": "1", "prompt_id": "p"}
    response = httpx.post(url + "/v1/verify", json={"items": [item]}, timeout=60)
    assert response.status_code == 200 and response.json()["results"][0]["status"] == "correct", response.text


def retired(url: str) -> list[list]:
    response = httpx.post(url + "/v1/ledger/query", json={"sql": "SELECT prompt_id FROM retired"}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["rows"]


@pytest.mark.parametrize(("overrides", "retired_after"), [
    ((), 1),  # the default: the first correct single-sample "group" retires the prompt
    (("--set", "ledger_retirement.window=all", "--set", "ledger_retirement.min_samples=4"), 4),
])
def test_single_sample_requests_retire_after_the_configured_samples(tmp_path, overrides, retired_after):
    server = ServerProcess("--ledger", str(tmp_path / "ledger.duckdb"), *overrides).start()
    try:
        for i in range(1, 5):
            one_correct_sample(server.url, i)
            assert retired(server.url) == ([["p"]] if i >= retired_after else []), i
    finally:
        server.stop()


def test_a_bad_retirement_setting_is_refused_naming_it(tmp_path):
    from scalerl.env.contracts.config_loader import ConfigError, load_config
    from scalerl.env.server.server_config import ServerConfig

    with pytest.raises(ConfigError, match="ledger_retirement.min_samples"):
        load_config(ServerConfig, None, ["ledger_retirement.min_samples=0"])
