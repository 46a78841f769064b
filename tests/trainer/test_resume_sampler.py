"""A resumed run draws exactly the prompts the interrupted one would have drawn next: the checkpoint's
sampler state (and the prompts of the batch it had begun) is restored by `scalerl.trainer.run.setup.setup_run`.
Real run folders, checkpoints and ledgers of the tiny CPU model (no warm start: only the draws matter)."""

from __future__ import annotations

from scalerl.env.contracts.config_loader import load_config
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.run.loop import checkpoint
from scalerl.trainer.run.setup import setup_run

OVERRIDES = ["warm_start.enabled=false", "validation.enabled=false", "pipeline.prompts_per_step=8"]


def draw(run, n: int) -> list[str]:
    with run.rollouts._lock:  # as `Rollouts.make_request` draws
        return [run.rollouts.draw().prompt_id for _ in range(n)]


def test_a_resumed_run_continues_the_interrupted_runs_draws(tmp_path):
    cfg = load_config(TrainConfig, None, OVERRIDES + ["curriculum.priority.mode=learnability"])
    run = setup_run(cfg, tmp_path)
    try:
        draw(run, 13)  # one batch of 8 and 5 of the next
        checkpoint(run)
        draw(run, 9)  # drawn after the checkpoint: lost by the interruption
    finally:
        run.close()
    resumed = setup_run(cfg, tmp_path, resume=True)
    try:
        got = draw(resumed, 11)
    finally:
        resumed.close()

    reference = setup_run(cfg, tmp_path / "reference")  # the same run, never interrupted
    try:
        expected = draw(reference, 13 + 11)[13:]
    finally:
        reference.close()
    assert got == expected
