"""The second opinion in metrics.jsonl: a short run of the CPU default (tiny model, cached warm start, real
verifiers) carries per domain it trained on the negatives re-checked, those the second judge accepts and their share;
the ledger's `second_opinion` column holds the same opinions."""

from __future__ import annotations

import duckdb
import pytest
from scalerl.env.contracts.config_loader import load_config
from scalerl.env.contracts.records import Status, Verdict
from scalerl.trainer.config.train import TrainConfig
from scalerl.trainer.run.log import read_metrics
from scalerl.trainer.run.loop import second_opinion_metrics

STEPS = 4
SHORT = [f"pipeline.max_steps={STEPS}", "pipeline.k=1", "pipeline.prompts_per_step=8", "pipeline.samples_per_prompt=8",
         "pipeline.max_time_s=null", "validation.enabled=false", "checkpoint.every_steps=100",
         "logging.progress=lines", "verifier.math.second_opinion=1.0", "verifier.code.second_opinion=1.0"]

pytestmark = pytest.mark.timeout(2400)


def test_counts_and_share_of_one_step() -> None:
    def verdict(status: Status, mark: str | None = None) -> Verdict:
        return Verdict.of(status, details={"second_opinion": mark} if mark else {})

    verdicts = [verdict(Status.correct), verdict(Status.wrong, "accepts"), verdict(Status.wrong, "rejects"),
                verdict(Status.no_answer, "rejects"), verdict(Status.wrong)]
    assert second_opinion_metrics("math", verdicts) == {
        "second_opinion/math/checked": 3.0, "second_opinion/math/accepts": 1.0, "second_opinion/math/fn_rate": 1 / 3}
    assert second_opinion_metrics("code", verdicts[:1])["second_opinion/code/fn_rate"] is None


def test_every_step_line_carries_the_second_opinion(tmp_path) -> None:
    from scalerl.trainer.run.loop import train

    cfg = load_config(TrainConfig, None, SHORT)
    train(cfg, tmp_path / "run")
    steps = read_metrics(tmp_path / "run" / "metrics.jsonl", "step")
    assert [r["step"] for r in steps] == list(range(1, STEPS + 1))
    for r in steps:  # a step carries the domains it trained on (the sampler mixes them by batch)
        for domain in [d for d in cfg.domains if f"groups/{d}" in r]:
            checked, accepts = r[f"second_opinion/{domain}/checked"], r[f"second_opinion/{domain}/accepts"]
            assert 0 <= accepts <= checked
            assert r[f"second_opinion/{domain}/fn_rate"] == (accepts / checked if checked else None)
    checked = sum(r.get("second_opinion/math/checked", 0) for r in steps)
    assert checked > 0, "the tiny model's wrong answers are re-checked"
    with duckdb.connect(str(tmp_path / "run" / "ledger.duckdb"), read_only=True) as con:
        recorded = dict(con.execute("SELECT second_opinion, count(*) FROM attempts WHERE domain = 'math' "
                                    "AND second_opinion IS NOT NULL GROUP BY 1").fetchall())
    accepts = sum(r.get("second_opinion/math/accepts", 0) for r in steps)
    assert recorded == {k: v for k, v in (("accepts", accepts), ("rejects", checked - accepts)) if v}
