"""The sampler with a strategy policy, on real DuckDB ledgers built by hand: defaults reproduce the
plain sampler exactly, each strategy changes the draws the way its rule says, and a sampler rebuilt
on the same ledger continues with the same order."""

from __future__ import annotations

from collections import Counter

from scalerl.curriculum.ledger.retirement import RetirementConfig
from scalerl.curriculum.ledger.store import Ledger
from scalerl.curriculum.policy import CurriculumPolicy
from scalerl.curriculum.sampler import Sampler
from scalerl.curriculum.strategy_config import StrategyConfig

from tests.curriculum.test_strategy_functions import group
from tests.support.ledger_data import PROBLEMS

MATH = [p.prompt_id for p in PROBLEMS if p.domain == "math"]
WEIGHTS = {"math": 1, "code": 1}


def policy(**cfg) -> CurriculumPolicy:
    return CurriculumPolicy(StrategyConfig.model_validate(cfg), seed=3)


def draws(sampler: Sampler, n: int, size: int = 8, ledger: Ledger | None = None, step0: int = 0) -> list[list[str]]:
    """`n` batches; with a ledger each drawn prompt gets a group (pass count from its number)."""
    out = []
    for b in range(n):
        batch = [p.prompt_id for p in sampler.next_batch(size)]
        out.append(batch)
        if ledger is not None:  # one transaction per batch
            ledger.record_attempts([{"prompt_id": pid, "domain": pid.split("-")[0], "step": step0 + b + 1,
                                     "sample_index": i, "status": "correct" if i < int(pid[-3:]) % 9 else "wrong"}
                                    for pid in batch for i in range(8)])
    return out


def test_default_strategies_reproduce_the_plain_sampler_exactly(tmp_path):
    with Ledger(tmp_path / "a.duckdb") as la, Ledger(tmp_path / "b.duckdb") as lb:
        la.upsert_problems(PROBLEMS)
        lb.upsert_problems(PROBLEMS)
        plain = draws(Sampler(PROBLEMS, weights=WEIGHTS, seed=3, ledger=la), 20, ledger=la)
        hooked = draws(Sampler(PROBLEMS, weights=WEIGHTS, seed=3, ledger=lb, policy=policy()), 20, ledger=lb)
        assert plain == hooked
        assert la.retired_ids() == lb.retired_ids() and la.retired_ids()  # retirements happened on the way


def test_learnability_prefers_prompts_near_half_and_stays_without_replacement(tmp_path):
    with Ledger(tmp_path / "l.duckdb", retirement=RetirementConfig(enabled=False)) as led:
        for i, pid in enumerate(MATH):  # math-000..009 solved half the time, the rest never or always
            group(led, pid, 1, 4 if i < 10 else (0 if i % 2 else 8))
        s = Sampler(PROBLEMS, weights={"math": 1}, seed=0, ledger=led,
                    policy=policy(priority={"mode": "learnability", "floor": 0.001}))
        epoch = [pid for batch in draws(s, 3, 10) for pid in batch]
        assert sorted(epoch) == sorted(MATH)  # one epoch: every prompt exactly once
        assert set(epoch[:10]) == set(MATH[:10])  # the p = 0.5 prompts come first


def test_failure_priority_and_pools_draw_their_favoured_prompts_first(tmp_path):
    # failure: the never-solved prompts (1 - p = 1 vs 0.125); pools: the normal pool (weight 1.0 over
    # 10 prompts) against the hard and easy pools (0.2 each, over 10 prompts each)
    for mode, favoured in (("failure", 0), ("pools", 4)):
        with Ledger(tmp_path / f"{mode}.duckdb", retirement=RetirementConfig(enabled=False)) as led:
            for i, pid in enumerate(MATH):
                group(led, pid, 1, favoured if i < 10 else (0 if mode == "pools" and i < 20 else 7))
            s = Sampler(PROBLEMS, weights={"math": 1}, seed=0, ledger=led, policy=policy(priority={"mode": mode}))
            first = [pid for batch in draws(s, 1, 10) for pid in batch]
            assert sum(pid in MATH[:10] for pid in first) >= 6, (mode, first)


def test_bench_hard_side_passes_over_hopeless_prompts_and_counts_them(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as led:
        for pid in MATH[:20]:
            group(led, pid, 1, 0, n=16)
        pol = policy(bench={"last_k": 1, "hard_at": 0.0, "min_samples": 16})
        s = Sampler(PROBLEMS, weights={"math": 1}, seed=0, ledger=led, policy=pol)
        drawn = [pid for batch in draws(s, 3, 10) for pid in batch]
        assert set(drawn) == set(MATH[20:])  # only the 10 not benched, each epoch
        assert pol.take_metrics()["curriculum/benched_hard"] >= 20 * 2  # passed over in every epoch


def test_greso_skips_prompts_with_zero_variance_streaks(tmp_path):
    with Ledger(tmp_path / "l.duckdb", retirement=RetirementConfig(enabled=False)) as led:
        for step in (1, 2, 3, 4):
            for pid in MATH[:15]:
                group(led, pid, step, 8)  # always solved: a streak of 4 all-correct groups
            for pid in MATH[15:]:
                group(led, pid, step, 4)
        pol = policy(skip={"mode": "greso"})
        s = Sampler(PROBLEMS, weights={"math": 1}, seed=0, ledger=led, policy=pol)
        first = [pid for batch in draws(s, 2, 8) for pid in batch]
        streaky = sum(pid in MATH[:15] for pid in first)
        assert streaky <= 5  # each skipped with probability 1 - p^4 (p about 0.5): most are passed over
        metrics = pol.take_metrics()
        assert metrics["curriculum/skipped_easy"] >= 5 and "curriculum/p_easy" in metrics


def test_readmission_probe_and_resume_fraction(tmp_path):
    path = tmp_path / "l.duckdb"
    with Ledger(path) as led:
        for pid in MATH[:20]:
            group(led, pid, 1, 8)  # all retired (pass rate 1.0 >= 0.9)
        assert len(led.retired_ids()) == 20
        probe = policy(readmission={"mode": "probe", "probe_probability": 0.3})
        drawn = Counter(pid for batch in draws(Sampler(PROBLEMS, weights={"math": 1}, seed=0, ledger=led,
                                                       policy=probe, name="probe"), 10, 10) for pid in batch)
        assert 0 < sum(n for pid, n in drawn.items() if pid in MATH[:20]) == probe.take_metrics()["curriculum/probed"]
        cfg = {"readmission": {"mode": "resume_fraction", "fraction": 0.25, "queue_every": 1}}
        draws(Sampler(PROBLEMS, weights={"math": 1}, seed=0, ledger=led, policy=policy(**cfg), name="r"), 1, 4)
    with Ledger(path) as led:  # a resume queues a quarter of the retired prompts for one more group each
        pol = policy(**cfg)
        again = [pid for batch in draws(Sampler(PROBLEMS, weights={"math": 1}, seed=0, ledger=led, policy=pol,
                                                name="r"), 2, 10) for pid in batch]
        assert sum(pid in MATH[:20] for pid in again) == 5 == pol.take_metrics()["curriculum/readmitted"]


def test_learning_progress_mix_shifts_the_domain_share(tmp_path):
    with Ledger(tmp_path / "l.duckdb", retirement=RetirementConfig(enabled=False)) as led:
        for pid in MATH:
            group(led, pid, 1, 4)  # math: p = 0.5, the most to learn
        for p in PROBLEMS:
            if p.domain == "code":
                group(led, p.prompt_id, 1, 0, domain="code")  # code: nothing to learn yet
        pol = policy(mixing={"mode": "learning_progress", "ucb": 0.0})
        drawn = [pid for batch in draws(Sampler(PROBLEMS, weights=WEIGHTS, seed=0, ledger=led, policy=pol), 5, 8)
                 for pid in batch]
        shares = Counter(pid.split("-")[0] for pid in drawn)
        assert shares["math"] > 4 * shares["code"]


def test_stage_levels_and_refiltering(tmp_path):
    prior_path = tmp_path / "profile.duckdb"
    with Ledger(prior_path, retirement=RetirementConfig(enabled=False)) as prof:
        for i, pid in enumerate(MATH):
            group(prof, pid, 0, 8 if i < 10 else 2)  # math-000..009 easy for the base model
    prior = {pid: (1.0 if i < 10 else 0.25) for i, pid in enumerate(MATH)}
    cfg = StrategyConfig.model_validate({"prior_ledger": str(prior_path), "stages": [
        {"until_batch": 2, "min_prior": 0.5, "drop_above": 0.6}, {}]})
    with Ledger(tmp_path / "l.duckdb", retirement=RetirementConfig(enabled=False)) as led:
        pol = CurriculumPolicy(cfg, seed=0, prior=prior)
        s = Sampler(PROBLEMS, weights={"math": 1}, seed=0, ledger=led, policy=pol)
        stage1 = draws(s, 2, 5, ledger=led)
        assert set(sum(stage1, [])) <= set(MATH[:10])  # level: prior >= 0.5 only
        later = set(sum(draws(s, 4, 5, ledger=led, step0=2), []))
        solved = {pid for pid in sum(stage1, []) if int(pid[-3:]) % 9 * 1.0 / 8 > 0.6}
        assert later and not later & solved  # prompts above 0.6 in stage 1 are dropped afterwards


def test_resume_from_the_ledger_gives_the_same_order_with_strategies(tmp_path):
    cfg = {"priority": {"mode": "learnability"}, "skip": {"mode": "greso"},
           "bench": {"last_k": 2, "hard_at": 0.0, "min_samples": 8}, "mixing": {"mode": "learning_progress"}}
    with Ledger(tmp_path / "ref.duckdb") as ref:
        expected = draws(Sampler(PROBLEMS, weights=WEIGHTS, seed=5, ledger=ref, policy=policy(**cfg)), 9, ledger=ref)
    got: list[list[str]] = []
    path = tmp_path / "run.duckdb"
    for start, stop in [(0, 3), (3, 7), (7, 9)]:  # two restarts
        with Ledger(path) as led:
            s = Sampler(PROBLEMS, weights=WEIGHTS, seed=5, ledger=led, policy=policy(**cfg))
            got += draws(s, stop - start, ledger=led, step0=start)
    assert got == expected


def test_priority_with_replacement_repeats_the_favoured_prompts(tmp_path):
    with Ledger(tmp_path / "l.duckdb", retirement=RetirementConfig(enabled=False)) as led:
        for i, pid in enumerate(MATH):
            group(led, pid, 1, 4 if i < 5 else 0)  # five prompts at p = 0.5, the rest never solved
        s = Sampler(PROBLEMS, weights={"math": 1}, seed=0, ledger=led,
                    policy=policy(priority={"mode": "learnability", "replacement": True, "floor": 0.001}))
        drawn = Counter(pid for batch in draws(s, 3, 10) for pid in batch)
        assert sum(drawn[pid] for pid in MATH[:5]) >= 25  # 30 draws: the learnable five come back again and again


def pipelined_draws(sampler: Sampler, n: int, size: int, ledger: Ledger, ahead: int,
                    extra: dict[int, int] | None = None) -> list[list[str]]:
    """`n` batches drawn as PipelineRL-k does: batch b is recorded (trained at step b + 1) only once the
    sampler has drawn `ahead` batches beyond it; `extra` {step: groups} makes a step also train that many
    groups of the next batch (a refill), so steps and batches drift apart."""
    batches: list[list[str]] = []
    pending: list[str] = []
    step = 0
    for b in range(n + ahead):
        if b < n:
            batches.append([p.prompt_id for p in sampler.next_batch(size)])
            pending += batches[-1]
        if b >= ahead and pending:
            step += 1
            take = size + (extra or {}).get(step, 0)
            trained, pending = pending[:take], pending[take:]
            ledger.record_attempts([{"prompt_id": pid, "domain": "math", "step": step, "sample_index": i,
                                     "status": "correct" if i < int(pid[-3:]) % 9 else "wrong"}
                                    for pid in trained for i in range(8)])
    return batches


def stage_solved(batches: list[list[str]]) -> set[str]:
    return {pid for pid in sum(batches, []) if int(pid[-3:]) % 9 / 8 > 0.6}


def test_stage_refiltering_covers_the_whole_stage_when_the_sampler_runs_ahead(tmp_path):
    # PipelineRL-3: when the sampler draws the next stage's first batch, none of the stage's groups is in
    # the ledger yet; the prompts solved in the stage's last batches must still be dropped afterwards.
    cfg = StrategyConfig.model_validate({"stages": [{"until_batch": 3, "drop_above": 0.6}, {}]})
    with Ledger(tmp_path / "l.duckdb", retirement=RetirementConfig(enabled=False)) as led:
        s = Sampler(PROBLEMS, weights={"math": 1}, seed=0, ledger=led, policy=CurriculumPolicy(cfg, seed=0))
        batches = pipelined_draws(s, 12, 5, led, ahead=3)
        solved = stage_solved(batches[:3])
        assert solved and batches[3:9]
        # the stage's groups reach the ledger while batches 3-5 are drawn; from then on none comes back
        assert not set(sum(batches[6:], [])) & solved


def test_stage_refiltering_counts_groups_not_steps(tmp_path):
    # Step 1 trains 10 groups (a refill): the stage's 15 groups are steps 1-2, and step 3 (batch 3, the
    # next stage's first) is not the stage's, although its number is <= until_batch.
    cfg = StrategyConfig.model_validate({"stages": [{"until_batch": 3, "drop_above": 0.6}, {}]})
    with Ledger(tmp_path / "l.duckdb", retirement=RetirementConfig(enabled=False)) as led:
        s = Sampler(PROBLEMS, weights={"math": 1}, seed=0, ledger=led, policy=CurriculumPolicy(cfg, seed=0))
        batches = pipelined_draws(s, 6, 5, led, ahead=1, extra={1: 5})
        assert stage_solved(batches[3:4]) and not set(batches[3]) & set(sum(batches[:3], []))
        assert s.policy._stage_dropped == stage_solved(batches[:3])
