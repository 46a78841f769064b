"""The sampler: seeded, deterministic, mixes domains by weight, resumes from the ledger, never samples
held-out or retired prompts."""

from __future__ import annotations

from collections import Counter

import pytest
from scalerl.curriculum.ledger.store import Ledger
from scalerl.curriculum.sampler import Sampler, SamplerExhausted, SamplerStateError
from scalerl.env.contracts.records import Verdict, VerifyItem

from tests.support.ledger_data import PROBLEMS


def ids(batch) -> list[str]:
    return [p.prompt_id for p in batch]


def flat(batches: list[list[str]]) -> list[str]:
    return [pid for batch in batches for pid in batch]


def draw(sampler: Sampler, n_batches: int, size: int = 8) -> list[list[str]]:
    return [ids(sampler.next_batch(size)) for _ in range(n_batches)]


def test_same_seed_same_batches_other_seed_other_batches():
    a = draw(Sampler(PROBLEMS, weights={"math": 1, "code": 1}, seed=7), 10)
    b = draw(Sampler(PROBLEMS, weights={"math": 1, "code": 1}, seed=7), 10)
    c = draw(Sampler(PROBLEMS, weights={"math": 1, "code": 1}, seed=8), 10)
    assert a == b and a != c


def test_each_epoch_visits_every_active_problem_once():
    s = Sampler(PROBLEMS, weights={"math": 1}, seed=0)
    first, second = flat(draw(s, 3, 10)), flat(draw(s, 3, 10))
    assert sorted(first) == sorted(second) == sorted(p.prompt_id for p in PROBLEMS if p.domain == "math")
    assert first != second  # a fresh permutation per epoch
    assert s.epochs() == {"math": 1}


def test_weights_set_the_domain_mix_regardless_of_domain_size():
    s = Sampler(PROBLEMS, weights={"math": 1, "code": 3}, seed=0)
    counts = Counter(pid.split("-")[0] for pid in flat(draw(s, 25, 8)))
    assert counts == {"code": 150, "math": 50}
    assert s.epochs()["code"] == 14  # 150 draws over 10 code problems: the small domain cycles faster


def test_holdout_problems_are_never_sampled():
    holdout = {f"math-{i:03d}" for i in range(10)}
    s = Sampler(PROBLEMS, weights={"math": 1, "code": 1}, seed=1, holdout_ids=holdout)
    assert not holdout & set(flat(draw(s, 50)))


def test_retired_prompts_are_never_sampled_again_even_mid_epoch():
    s = Sampler(PROBLEMS, weights={"math": 1}, seed=3)
    first = ids(s.next_batch(5))
    upcoming = {f"math-{i:03d}" for i in range(30)} - set(first)
    retire = sorted(upcoming)[:10]
    s.retire(retire)
    later = flat(draw(s, 20, 10))
    assert set(later) == {f"math-{i:03d}" for i in range(30)} - set(retire)


def test_exhausted_domains_leave_the_mix_and_then_the_sampler_stops():
    s = Sampler(PROBLEMS, weights={"math": 1, "code": 1}, seed=0)
    s.retire([p.prompt_id for p in PROBLEMS if p.domain == "code"])
    assert {pid.split("-")[0] for pid in flat(draw(s, 5))} == {"math"}
    s.retire([p.prompt_id for p in PROBLEMS])
    with pytest.raises(SamplerExhausted):
        s.next_batch(1)


def test_bad_weights_are_refused():
    with pytest.raises(ValueError, match="no problem has that domain"):
        Sampler([p for p in PROBLEMS if p.domain == "math"], weights={"math": 1, "code": 1}, seed=0)
    with pytest.raises(ValueError, match="negative"):
        Sampler(PROBLEMS, weights={"math": -1}, seed=0)


def _record_group(ledger: Ledger, pid: str, n_pass: int, step: int) -> None:
    items = [VerifyItem(domain="math", completion="x", answer="1", prompt_id=pid, sample_index=i) for i in range(16)]
    ledger.record(items, [Verdict.of("correct" if i < n_pass else "wrong") for i in range(16)], step=step)


def test_resume_from_the_ledger_continues_the_same_sequence(tmp_path):
    weights = {"math": 1, "code": 1}
    with Ledger(tmp_path / "ref.duckdb") as ref_ledger:
        ref = Sampler(PROBLEMS, weights=weights, seed=5, ledger=ref_ledger)
        expected = []
        for step in range(12):
            batch = ids(ref.next_batch(8))
            expected.append(batch)
            if step == 3:
                _record_group(ref_ledger, batch[0] if batch[0].startswith("math") else batch[1], 16, step)
    got = []
    path = tmp_path / "run.duckdb"
    for start, stop in [(0, 4), (4, 9), (9, 12)]:  # two restarts, one of them after a retirement
        with Ledger(path) as ledger:
            s = Sampler(PROBLEMS, weights=weights, seed=5, ledger=ledger)
            for step in range(start, stop):
                batch = ids(s.next_batch(8))
                got.append(batch)
                if step == 3:
                    _record_group(ledger, batch[0] if batch[0].startswith("math") else batch[1], 16, step)
    assert got == expected
    with Ledger(path, read_only=True) as ledger:
        (retired,) = ledger.retired_ids()
        assert retired not in set(flat(got[4:]))
        epochs = ledger.query("SELECT domain, max(epoch) FROM epochs GROUP BY domain ORDER BY domain").rows
        assert epochs == [["code", 4], ["math", 1]]
        assert ledger.query("SELECT epoch FROM retired").rows == [[0]]


def test_stored_state_for_other_problems_or_seed_is_refused(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as ledger:
        Sampler(PROBLEMS, weights={"math": 1}, seed=5, ledger=ledger).next_batch(4)
        with pytest.raises(SamplerStateError, match="seed"):
            Sampler(PROBLEMS, weights={"math": 1}, seed=6, ledger=ledger)
        with pytest.raises(SamplerStateError, match="fingerprint"):
            Sampler(PROBLEMS[1:], weights={"math": 1}, seed=5, ledger=ledger)
        fresh = Sampler(PROBLEMS, weights={"math": 1}, seed=6, ledger=ledger, resume=False)
        assert fresh.epochs() == {"math": -1}


def test_state_dict_round_trip_replays_exactly():
    a = Sampler(PROBLEMS, weights={"math": 2, "code": 1}, seed=9)
    draw(a, 7)
    a.retire(["math-001"])
    state = a.state_dict()
    b = Sampler(PROBLEMS, weights={"math": 2, "code": 1}, seed=9)
    b.load_state_dict(state)
    assert draw(a, 10) == draw(b, 10)
