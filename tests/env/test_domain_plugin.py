"""A third-party domain, installed the way a lab's package installs one, is scored end to end.

The plug-in is a real distribution on `PYTHONPATH` (a package and its `.dist-info` with an
`entry_points.txt` in the `scalerl.domains` group), so the registry finds it through
`importlib.metadata` exactly as it finds the built-in domains. It is scored by `scalerl-env verify`
and by a real `scalerl-env serve` process; its verifier settings come through `verifier.<name>`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.plugin_domain import install_word_plugin
from tests.support.server_harness import REPO, ServerProcess

PLUGIN = '''
from pydantic import BaseModel, ConfigDict
from scalerl.env.contracts.domains import DomainSpec, PromptDefaults
from scalerl.env.contracts.records import Status, Verdict


class WordConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    case_sensitive: bool = False


class WordVerifier:
    """Correct when the completion's last word is the reference word."""

    def __init__(self, config):
        self.settings = config.section("word")
        self.rewards = config.rewards

    def submit(self, items):
        def norm(text):
            return text if self.settings.case_sensitive else text.lower()

        def collect():
            out = []
            for item in items:
                words = item.completion.split()
                ok = bool(words) and norm(words[-1]) == norm(item.answer)
                status = Status.correct if ok else Status.wrong
                out.append(Verdict(status=status, reward=self.rewards.reward(status)))
            return out
        return collect

    def ready(self):
        return True

    def info(self):
        return {}

    def close(self):
        pass


SPEC = DomainSpec(name="word", reference="answer", description="last word equals the reference",
                  verifier=WordVerifier, verifier_config=lambda: WordConfig,
                  prompt=PromptDefaults(instruction="End with one word.", marker="one word"),
                  trains_by_default=False)
'''


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    return install_word_plugin(tmp_path_factory.mktemp("plugin"), PLUGIN)


def _env(plugin: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin), str(REPO)])}


ITEMS = [{"id": "a", "domain": "word", "completion": "the answer is Paris", "answer": "paris"},
         {"id": "b", "domain": "word", "completion": "the answer is Rome", "answer": "paris"},
         {"id": "c", "domain": "math", "completion": "\\boxed{4}", "answer": "4"}]


def _verify(plugin: Path, tmp_path: Path, *overrides: str) -> dict[str, str]:
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    cmd = [sys.executable, "-m", "scalerl.env.cli", "verify", "-f", str(items), "-w", "1", *overrides]
    done = subprocess.run(cmd, cwd=REPO, env=_env(plugin), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return {v["id"]: v["status"] for v in map(json.loads, done.stdout.splitlines())}


def test_verify_scores_the_plugin_domain_beside_math(plugin_path, tmp_path):
    assert _verify(plugin_path, tmp_path) == {"a": "correct", "b": "wrong", "c": "correct"}


def test_the_plugin_reads_its_own_verifier_section(plugin_path, tmp_path):
    assert _verify(plugin_path, tmp_path, "word.case_sensitive=true")["a"] == "wrong"


def test_an_unknown_setting_of_the_plugin_section_is_rejected(plugin_path, tmp_path):
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps(ITEMS[0]) + "\n")
    cmd = [sys.executable, "-m", "scalerl.env.cli", "verify", "-f", str(items), "word.colour=red"]
    done = subprocess.run(cmd, cwd=REPO, env=_env(plugin_path), capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "colour" in done.stderr + done.stdout


def test_the_server_scores_the_plugin_domain_and_names_an_uninstalled_one(plugin_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", _env(plugin_path)["PYTHONPATH"])
    server = ServerProcess().start()
    try:
        reply = httpx.post(server.url + "/v1/verify", json={"items": ITEMS[:2]}, timeout=60)
        assert reply.status_code == 200, reply.text
        assert [v["status"] for v in reply.json()["results"]] == ["correct", "wrong"]
        bad = httpx.post(server.url + "/v1/verify", json={"items": [{**ITEMS[0], "domain": "chem"}]}, timeout=60)
        assert bad.status_code == 422 and "chem" in bad.text and "domain" in bad.text
    finally:
        server.stop()
