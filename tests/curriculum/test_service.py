"""The curriculum service on a real DuckDB ledger: concurrent ranks, retirement, restart, bad input."""

from __future__ import annotations

import threading

import pytest
from scalerl.curriculum.ledger.store import Ledger
from scalerl.curriculum.service import CurriculumService, Member, SetConflictError, SetInputError, UnknownSetError
from scalerl.curriculum.service_models import DrawRequest, ReportRequest

EASY = {f"m{i}" for i in range(4)} | {"c0"}  # always solved: retired after their first group


def members() -> list[Member]:
    return ([Member(f"m{i}", "math", "gen", "train") for i in range(12)]
            + [Member(f"c{i}", "code", "gen", "train") for i in range(8)]
            + [Member("h0", "math", "gen", "heldout"), Member("h1", "code", "gen", "heldout")])


def rewards(pid: str, step: int) -> list[float]:
    """Deterministic outcomes: EASY prompts always correct, the others half right."""
    return [1.0] * 4 if pid in EASY else [1.0, 0.0, float(step % 2), 0.0]


def ranks_step(service: CurriculumService, name: str, step: int, world: int, n: int) -> list[list[str]]:
    """Every rank draws `step` in its own thread at once, then reports its groups; returns each rank's ids."""
    out: list[list[str]] = [[] for _ in range(world)]
    barrier = threading.Barrier(world)

    def rank(r: int) -> None:
        barrier.wait()
        got = service.get(name).draw(DrawRequest(draw_id=step, rank=r, world_size=world, n=n))
        out[r] = [p.prompt_id for p in got.prompts]
        assert got.stage == 0 and got.batch >= 1

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    groups = [{"prompt_id": pid, "rewards": rewards(pid, step)} for ids in out for pid in ids]
    service.get(name).report(ReportRequest(groups=groups, step=step))
    return out


def run_plan(path, steps: range, curriculum: dict, restart_at: int | None = None) -> list[list[list[str]]]:
    ledger = Ledger(path)
    service = CurriculumService(ledger)
    service.register("s", members(), seed=3, curriculum=curriculum)
    plan = []
    try:
        for step in steps:
            if step == restart_at:
                ledger.close()
                ledger = Ledger(path)
                service = CurriculumService(ledger)
            plan.append(ranks_step(service, "s", step, world=2, n=3))
    finally:
        ledger.close()
    return plan


@pytest.mark.parametrize("curriculum", [{}, {"priority.mode": "learnability"}, {"skip.mode": "greso"}],
                         ids=["uniform", "learnability", "greso"])
def test_concurrent_ranks_through_retirement_and_a_restart(tmp_path, curriculum):
    plan = run_plan(tmp_path / "a.duckdb", range(10), curriculum, restart_at=5)
    retired_at: dict[str, int] = {}
    for step, ranks in enumerate(plan):
        drawn = [pid for ids in ranks for pid in ids]
        assert len(drawn) == 6 == len(set(drawn)), f"draw {step} handed a prompt out twice: {ranks}"
        assert not {"h0", "h1"} & set(drawn)
        assert not [pid for pid in drawn if retired_at.get(pid, step) < step], "a retired prompt was drawn again"
        for pid in drawn:
            if pid in EASY:
                retired_at.setdefault(pid, step)  # reported solved at this step: retired from the next draw on
    assert set(retired_at) == EASY  # 10 draws of 6 walk every prompt: every easy one retired
    # the plan resumes: the same draws as a server that never stopped
    assert plan == run_plan(tmp_path / "b.duckdb", range(10), curriculum)
    with Ledger(tmp_path / "a.duckdb") as ledger:
        state = CurriculumService(ledger).get("s").state()
    assert state.retired_ids and set(state.retired_ids) == EASY and state.summary.draws == 10
    assert state.domains["math"].active == 8 and state.domains["code"].retired == 1


def test_within_an_epoch_no_prompt_repeats_across_draws(tmp_path):
    """Uniform walk: until a domain's epoch wraps, every draw brings prompts not drawn before."""
    with Ledger(tmp_path / "l.duckdb") as ledger:
        service = CurriculumService(ledger)
        service.register("s", members(), seed=0)
        seen: list[str] = []
        for step in range(3):  # 3 draws × 4 = 12 of 20 prompts, 6 per domain: inside the first epochs
            for r in range(2):
                seen += [p.prompt_id for p in service.get("s").draw(DrawRequest(draw_id=step, rank=r, world_size=2,
                                                                                 n=2)).prompts]
        assert len(seen) == len(set(seen)) == 12


def test_repeated_requests_get_the_same_prompts_also_after_a_restart(tmp_path):
    path = tmp_path / "l.duckdb"
    with Ledger(path) as ledger:
        service = CurriculumService(ledger)
        service.register("s", members(), seed=1)
        first = service.get("s").draw(DrawRequest(draw_id=7, rank=1, world_size=2, n=4))
        again = service.get("s").draw(DrawRequest(draw_id=7, rank=1, world_size=2, n=4))
        assert again == first
        with pytest.raises(SetConflictError, match="world_size=2, n=4"):
            service.get("s").draw(DrawRequest(draw_id=7, rank=0, world_size=4, n=2))
    with Ledger(path) as ledger:
        assert CurriculumService(ledger).get("s").draw(DrawRequest(draw_id=7, rank=1, world_size=2, n=4)) == first


def test_a_draw_is_topped_up_to_distinct_prompts(tmp_path):
    """With replacement the sampler repeats prompts within a batch; the draw still holds each once."""
    with Ledger(tmp_path / "l.duckdb") as ledger:
        service = CurriculumService(ledger)
        small = [Member(f"p{i}", "math", "gen", "train") for i in range(5)]
        service.register("r", small, curriculum={"priority": {"mode": "failure", "replacement": True}})
        for step in range(5):
            ids = [p.prompt_id for r in range(2)
                   for p in service.get("r").draw(DrawRequest(draw_id=step, rank=r, world_size=2, n=2)).prompts]
            assert len(set(ids)) == 4
        assert service.get("r").sampler.batches > 5  # some draws needed a top-up batch
        with pytest.raises(SetConflictError, match="5 active training prompts"):
            service.get("r").draw(DrawRequest(draw_id=99, rank=0, world_size=2, n=3))


def test_registration_is_idempotent_and_refuses_what_it_cannot_serve(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as ledger:
        service = CurriculumService(ledger)
        assert service.register("s", members(), curriculum={"priority.mode": "failure"}).created
        again = service.register("s", members(), curriculum={"curriculum.priority": {"mode": "failure"}})
        assert not again.created and again.train == 20 and again.heldout == 2
        with pytest.raises(SetConflictError, match="already registered"):
            service.register("s", members(), seed=5)
        cases = [({"curriculum": {"priority.mode": "hardest"}}, "curriculum.priority.mode"),
                 ({"curriculum": {"retirement.threshold": 0.5}}, "curriculum.retirement"),
                 ({"domain_weights": {"if": 1.0}}, "domain_weights")]
        for kwargs, field in cases:
            with pytest.raises(SetInputError) as err:
                service.register("t", members(), **kwargs)
            assert err.value.field == field
        with pytest.raises(SetInputError) as err:
            service.register("t", members() + [Member("m0", "math", "x", "train")])
        assert err.value.field == "records.22.prompt_id"
        with pytest.raises(UnknownSetError, match="registered: s"):
            service.get("t")
        with pytest.raises(SetInputError) as err:
            service.get("s").draw(DrawRequest(draw_id=0, rank=2, world_size=2, n=1))
        assert err.value.field == "rank"
        with pytest.raises(SetInputError) as err:
            service.get("s").report(ReportRequest(groups=[{"prompt_id": "m0", "rewards": [1]},
                                                          {"prompt_id": "zz", "rewards": [1]}]))
        assert err.value.field == "groups.1.prompt_id"
        assert ledger.query("SELECT count(*) FROM attempts").rows == [[0]]  # nothing of a refused report


def test_reported_groups_and_recorded_verdicts_both_retire(tmp_path):
    """Outcomes reach the set through the ledger, whoever recorded them (the report route or /v1/verify)."""
    with Ledger(tmp_path / "l.duckdb") as ledger:
        service = CurriculumService(ledger)
        service.register("s", members(), seed=0)
        out = service.get("s").report(ReportRequest(groups=[{"prompt_id": "m1", "rewards": [1, 1, 1, 1]},
                                                            {"prompt_id": "m2", "rewards": [0, 1, 0, 0]}], step=0))
        assert out.retired == ["m1"] and out.recorded == 8 and out.zero_variance == 1
        ledger.record_attempts([{"prompt_id": "c3", "domain": "code", "step": 0, "status": "correct"}] * 2)
        drawn = {p.prompt_id for step in range(4)
                 for p in service.get("s").draw(DrawRequest(draw_id=step, n=5)).prompts}
        assert not drawn & {"m1", "c3"}
        assert {f"c{i}" for i in range(8)} - {"c3"} <= drawn  # 10 code draws walked all 7 active code prompts


def test_a_draw_that_fails_to_commit_changes_nothing(tmp_path, monkeypatch):
    """The draw row and the sampler state it leaves commit together: after a failed commit (here the draw
    row's write raises, as a full disk would) the same draw, asked again in the same process or after a
    restart, is the one the uninterrupted plan makes."""
    from scalerl.curriculum.ledger import sets

    def plan(path, fail_at=None, restart=False):
        ledger = Ledger(path)
        service = CurriculumService(ledger)
        service.register("s", members(), seed=4, curriculum={"priority.mode": "learnability"})
        out = []
        real = sets.save_draw
        for step in range(6):
            if step == fail_at:
                def broken(*args, **kwargs):
                    raise OSError("no space left on device")
                monkeypatch.setattr(sets, "save_draw", broken)
                with pytest.raises(OSError):
                    service.get("s").draw(DrawRequest(draw_id=step, n=5))
                monkeypatch.setattr(sets, "save_draw", real)
                assert ledger.query(f"SELECT count(*) FROM curriculum_draws WHERE draw_id = {step}").rows == [[0]]
                if restart:
                    ledger.close()
                    ledger = Ledger(path)
                    service = CurriculumService(ledger)
            ids = [p.prompt_id for p in service.get("s").draw(DrawRequest(draw_id=step, n=5)).prompts]
            service.get("s").report(ReportRequest(groups=[{"prompt_id": pid, "rewards": rewards(pid, step)}
                                                          for pid in ids], step=step))
            out.append(ids)
        ledger.close()
        return out

    reference = plan(tmp_path / "ref.duckdb")
    assert plan(tmp_path / "retry.duckdb", fail_at=3) == reference
    assert plan(tmp_path / "restart.duckdb", fail_at=3, restart=True) == reference
