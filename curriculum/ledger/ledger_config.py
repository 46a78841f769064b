"""`LedgerConfig`: what a ledger owner keeps beyond the verdict, the one source of its defaults.

A training run reads it as `ledger.*` (`scalerl.trainer.config.train.TrainConfig`), the reward server as
`ledger_settings.*` (`scalerl.env.server.server_config.ServerConfig`); both hand it to
`scalerl.curriculum.ledger.store.Ledger`. It does not hold the retirement rule (`curriculum.retirement`,
`ledger_retirement`), which decides training, not what is kept.
"""

from __future__ import annotations

from pydantic import Field
from scalerl.env.contracts.records import Strict


class LedgerConfig(Strict):
    store_completions: bool = Field(
        default=False, description="keep each attempt's completion text (`attempts.completion`), so "
        "`scalerl-env ledger rescore` can score it again with another verifier version; off: NULL")
