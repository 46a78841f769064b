"""ScaleRL on a local Ray cluster: trainer, generator, verifier pool and ledger as actors.

One local cluster per module (`ray.init(num_cpus=2)`, ~10 s). Runs are short (a few steps of the tiny
model after a short, cached warm start); they check the runtime, not learning
(tests/trainer/test_train_e2e.py does that).
"""

from __future__ import annotations

import threading
import time

import pytest
import ray
from scalerl.env.contracts.config_loader import load_config
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.run.log import read_metrics

pytestmark = pytest.mark.ray

SHORT = [
    "pipeline.prompts_per_step=4",
    "pipeline.samples_per_prompt=4",
    "data.generated_per_domain=300",
    "validation.enabled=false",
    "warm_start.steps=40",
    "checkpoint.every_steps=1000",
    "logging.progress=lines",
    "verifier.math.workers=1",
    "verifier.code.slots=1",
]


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, namespace="scalerl-test")
    yield
    ray.shutdown()


def _config(*extra: str) -> TrainConfig:
    return load_config(TrainConfig, None, [*SHORT, *extra])


def _step_keys(out) -> set[str]:
    steps = read_metrics(out / "metrics.jsonl", "step")
    assert steps, "no step was logged"
    return set().union(*(r.keys() for r in steps))


def test_ray_run_logs_the_same_metrics_schema_as_in_process(cluster, tmp_path):
    from scalerl.trainer.run.loop import train, train_in_ray

    # Every group kept (the random-ish policy's rewards are mostly all 0): the training path runs too.
    steps = ["pipeline.max_steps=3", "pipeline.k=0", "curriculum.zero_variance.mode=keep"]
    local = train(_config(*steps), tmp_path / "local")
    remote = train_in_ray(_config(*steps, "ray.enabled=true"), tmp_path / "ray")
    assert remote["steps"] == local["steps"] == 3
    assert set(remote) == set(local)
    assert _step_keys(tmp_path / "ray") == _step_keys(tmp_path / "local")
    records = read_metrics(tmp_path / "ray" / "metrics.jsonl", "step")
    assert [r["step"] for r in records] == [1, 2, 3]
    assert all(r["tokens_per_s"] is None or r["tokens_per_s"] > 0 for r in records)
    assert (tmp_path / "ray" / "ledger.duckdb").exists()


def _generator(timeout_s: float = 120.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        names = [n for n in ray.util.list_named_actors() if n.startswith("generator-0-")]
        if names:
            return ray.get_actor(names[0])
        time.sleep(0.5)
    raise AssertionError("no generator actor appeared")


def _pid_after_restart(generator, before: int, timeout_s: float = 120.0) -> int:
    """The pid behind the same actor handle once Ray has restarted it (kill is asynchronous)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            pid = ray.get(generator.pid.remote(), timeout=30)
        except ray.exceptions.RayActorError:
            pid = before
        if pid != before:
            return pid
        time.sleep(0.2)
    return before


def test_killed_generator_is_restarted_and_the_run_continues(cluster, tmp_path):
    from scalerl.trainer.run.loop import train_in_ray

    # Enough steps that the run is still going when the kill lands (a step takes well under a second idle).
    k, max_steps = 2, 40
    out = tmp_path / "run"
    result: dict = {}

    def run() -> None:
        try:
            result["summary"] = train_in_ray(
                _config(f"pipeline.max_steps={max_steps}", f"pipeline.k={k}", "ray.enabled=true"), out
            )
        except BaseException as exc:  # re-raised in the test thread below
            result["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    generator = _generator()
    before = ray.get(generator.pid.remote())
    deadline = time.monotonic() + 180
    while len(read_metrics(out / "metrics.jsonl", "step")) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    ray.kill(generator, no_restart=False)
    after = _pid_after_restart(generator, before)
    thread.join(timeout=240)
    assert not thread.is_alive(), "the run did not finish after the generator was killed"
    if "error" in result:
        raise result["error"]
    records = read_metrics(out / "metrics.jsonl", "step")
    assert [r["step"] for r in records] == list(range(1, max_steps + 1))
    assert after != before, "the generator actor was not restarted"
    lags = [r["lag/max"] for r in records if r["lag/max"] is not None]
    assert not lags or max(lags) <= k, "a restarted generator must not sample with stale weights"
