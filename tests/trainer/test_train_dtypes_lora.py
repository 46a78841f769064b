"""The shortened CPU default end to end in bf16 (`engine.dtype=bfloat16`, `optim.precision=bf16`) and with
LoRA adapters: both learn. Same run length, held-out sample count and smallest asserted rise as
tests/trainer/test_train_e2e.py (2 standard errors of a difference); `slow` (several minutes each).
"""

from __future__ import annotations

import pytest
from scalerl.env.contracts.config_loader import load_config
from scalerl.trainer.config.train import TrainConfig

from tests.trainer.test_train_e2e import MIN_HELDOUT_RISE, SHORT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]
VARIANTS = {
    "bf16": ["engine.dtype=bfloat16", "optim.precision=bf16"],
    # Adapters need a larger step than full fine-tuning (the usual 10x; measured in docs/results.md).
    "lora": ["lora.enabled=true", "optim.lr=1e-3"],
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_short_cpu_default_learns(tmp_path, variant):
    from scalerl.trainer.run.loop import train

    summary = train(load_config(TrainConfig, None, [*SHORT, *VARIANTS[variant]]), tmp_path / "run")
    rates = summary["heldout_pass_rate"]
    print(f"{variant}: held-out pass rate {rates}")
    for domain, rise in MIN_HELDOUT_RISE.items():
        first, last = rates[domain]["first"], rates[domain]["last"]
        assert last > first + rise, f"{variant} {domain}: held-out pass rate {first:.3f} -> {last:.3f}"
