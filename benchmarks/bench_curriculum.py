"""What the curriculum strategies cost the sampler: ms per `next_batch(16)` with ScaleRL's defaults
(the plain walk) and with every sampler strategy on (learnability priority, bench, GRESO, probe
re-admission, learning-progress mixing), on a ledger the size of a long CPU-default run.

    .venv/bin/python benchmarks/bench_curriculum.py [--prompts 4500] [--steps 400]
    .venv/bin/python benchmarks/bench_curriculum.py --simulate [--steps 150]

`--simulate`: what the sampler strategies do to the groups a run generates, without a model: 300
prompts with fixed true pass rates (a third never solved, a sixth always solved, the rest uniform in
(0, 1)), 16 prompts x 8 Bernoulli samples per step, ScaleRL retirement on, several epochs; prints the
share of informative (non-zero-variance) groups and the prompts skipped. The policy does not learn, so
this measures the selection rules only.

Prints the timings and the load average; nothing is asserted (docs/results.md records the figures).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from scalerl.curriculum.ledger.retirement import RetirementConfig
from scalerl.curriculum.ledger.store import Ledger
from scalerl.curriculum.policy import CurriculumPolicy
from scalerl.curriculum.sampler import Sampler
from scalerl.curriculum.strategy_config import StrategyConfig
from scalerl.env.contracts.records import ChatMessage, ProblemRecord

EVERY = {"priority": {"mode": "learnability"}, "skip": {"mode": "greso"}, "mixing": {"mode": "learning_progress"},
         "bench": {"last_k": 2, "hard_at": 0.0}, "readmission": {"mode": "probe"}}


def problems(n: int) -> list[ProblemRecord]:
    return [ProblemRecord(prompt_id=f"math-{i:05d}", domain="math", source="bench", answer="1",
                          prompt=[ChatMessage(role="user", content=f"m {i}")]) for i in range(n)]


def fill(ledger: Ledger, pids: list[str], steps: int, rng: random.Random) -> None:
    skill = {pid: rng.random() for pid in pids}
    for step in range(1, steps + 1):
        batch = rng.sample(pids, 16)
        ledger.record_attempts([{"prompt_id": pid, "domain": "math", "step": step, "sample_index": i,
                                 "status": "correct" if rng.random() < skill[pid] else "wrong"}
                                for pid in batch for i in range(8)])


def time_batches(sampler: Sampler, n: int = 30) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        sampler.next_batch(16)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


SIMULATED = {"baseline": {}, "learnability": {"priority": {"mode": "learnability"}},
             "failure": {"priority": {"mode": "failure"}}, "pools": {"priority": {"mode": "pools"}},
             "learnability+r": {"priority": {"mode": "learnability", "replacement": True}},
             "failure+r": {"priority": {"mode": "failure", "replacement": True}},
             "pools+r": {"priority": {"mode": "pools", "replacement": True}},
             "greso": {"skip": {"mode": "greso"}}, "bench-hard": {"bench": {"last_k": 2, "hard_at": 0.0}}}


def simulate(name: str, strategies: dict, steps: int, tmp: Path) -> str:
    rng = random.Random(0)
    probs = problems(300)
    truth = {p.prompt_id: (0.0 if i % 3 == 0 else 1.0 if i % 6 == 1 else rng.random()) for i, p in enumerate(probs)}
    policy = CurriculumPolicy(StrategyConfig.model_validate(strategies), seed=0) if strategies else None
    informative = groups = 0
    with Ledger(tmp / f"{name}.duckdb") as ledger:
        sampler = Sampler(probs, weights={"math": 1}, seed=0, ledger=ledger, policy=policy)
        for step in range(1, steps + 1):
            rows = []
            for p in sampler.next_batch(16):
                outcome = [rng.random() < truth[p.prompt_id] for _ in range(8)]
                informative += len(set(outcome)) > 1
                groups += 1
                rows += [{"prompt_id": p.prompt_id, "domain": "math", "step": step, "sample_index": i,
                          "status": "correct" if ok else "wrong"} for i, ok in enumerate(outcome)]
            ledger.record_attempts(rows)
        events = {} if policy is None else {k: int(v) for k, v in policy.events.items()}
    return f"{name:15} informative groups {informative / groups:.3f} of {groups}; passed over {events}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=4500)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--simulate", action="store_true")
    args = ap.parse_args()
    if args.simulate:
        with tempfile.TemporaryDirectory() as tmp:
            for name, strategies in SIMULATED.items():
                print(simulate(name, strategies, args.steps, Path(tmp)))
        return
    probs = problems(args.prompts)
    with tempfile.TemporaryDirectory() as tmp, Ledger(Path(tmp) / "l.duckdb",
                                                      retirement=RetirementConfig(enabled=False)) as ledger:
        ledger.upsert_problems(probs)
        fill(ledger, [p.prompt_id for p in probs], args.steps, random.Random(0))
        rows = ledger.query("SELECT count(*) FROM attempts").rows[0][0]
        plain = time_batches(Sampler(probs, weights={"math": 1}, seed=0, ledger=ledger, name="plain"))
        policy = CurriculumPolicy(StrategyConfig.model_validate(EVERY), seed=0)
        every = time_batches(Sampler(probs, weights={"math": 1}, seed=0, ledger=ledger, name="every", policy=policy))
    print(f"{args.prompts} prompts, {rows} attempts: next_batch(16) median {plain:.1f} ms plain, "
          f"{every:.1f} ms with every sampler strategy; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
