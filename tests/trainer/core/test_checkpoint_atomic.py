"""A checkpoint that `latest` names always holds the ledger copy: a process killed in the middle of the
checkpoint phase leaves the previous complete checkpoint, and resume restores the ledger from it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from scalerl.env.contracts.paths import REPO
from scalerl.trainer.core.checkpoint import latest_checkpoint
from scalerl.trainer.run.setup import LEDGER, prepare_folder

SCRIPT = textwrap.dedent("""
    import contextlib, os, shutil, sys
    from pathlib import Path
    from types import SimpleNamespace
    from scalerl.curriculum.ledger.store import Ledger
    from tests.support.models import tiny_llama
    from scalerl.trainer.core.recipe_config import LossConfig, OptimConfig
    from scalerl.trainer.distributed.leader import RankGroup
    from scalerl.trainer.run.loop import checkpoint

    out = Path(sys.argv[1])
    model = tiny_llama()
    ledger = Ledger(out / "ledger.duckdb")
    ledger.record_attempts({"prompt_id": ["p"], "domain": ["math"], "step": [1], "status": ["correct"]})
    ranks = RankGroup.single(model, OptimConfig(), LossConfig())
    run = SimpleNamespace(
        out=out, step=1, model=model, trainer=ranks.trainer, ranks=ranks, ledger=ledger,
        cfg=SimpleNamespace(checkpoint=SimpleNamespace(keep_last=None)),
        runtime=SimpleNamespace(next_group_id=lambda: 0), state=SimpleNamespace(elapsed_s=0.0),
        clock=SimpleNamespace(state=dict), sampler=SimpleNamespace(state_dict=dict),
        rollouts=SimpleNamespace(paused=contextlib.nullcontext, draw=SimpleNamespace(state=dict)))
    checkpoint(run)
    run.step = 2
    ledger.record_attempts({"prompt_id": ["p"], "domain": ["math"], "step": [2], "status": ["wrong"]})
    shutil.move = lambda *a, **k: os._exit(9)  # the process dies at the first move of the step-2 checkpoint
    checkpoint(run)
""")


def test_a_kill_inside_the_checkpoint_phase_leaves_latest_with_its_ledger_and_resume_works(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 9, proc.stderr[-2000:]
    latest = latest_checkpoint(out / "checkpoints")
    assert latest is not None and (latest / LEDGER).is_file(), f"latest checkpoint {latest} has no ledger"
    restored = prepare_folder(None, out, resume=True)
    assert restored == latest and (out / LEDGER).is_file()
