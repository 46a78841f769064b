"""The curriculum routes through real `scalerl-env serve` processes: two ranks drawing concurrently through
retirement and a restart of the server on the same ledger file (after SIGTERM, and after SIGKILL);
typed errors."""

from __future__ import annotations

import os
import signal
import threading

import httpx
import pytest
from scalerl.curriculum.ledger.store import Ledger
from scalerl.curriculum.service import CurriculumService
from scalerl.curriculum.service_models import DrawRequest, ReportRequest
from scalerl.env.client import RewardServerError
from scalerl.env.contracts.records import ProblemRecord
from scalerl.env.curriculum_client import CurriculumClient
from scalerl.env.sources.verl import write_records

from tests.support.server_harness import OVERLOAD, ServerProcess, alive, descendants, shared_server

EASY = {f"q{i}" for i in range(0, 16, 4)}  # always answered right: retired after their first group
SETTINGS = {"priority.mode": "learnability"}  # weights read from the ledger's pass rates at every draw
WORLD, N, STEPS, RESTART_AT = 2, 3, 8, 4


def problems(n: int, prefix: str = "q") -> list[ProblemRecord]:
    return [ProblemRecord(prompt_id=f"{prefix}{i}", domain="math", source="sums", answer=str(i + 1),
                          prompt=[{"role": "user", "content": f"What is {i} + 1?"}]) for i in range(n)]


def outcomes(pid: str, step: int) -> list[bool]:
    return [True] * 4 if pid in EASY else [True, False, step % 2 == 0, False]


def rank_step(url: str, step: int, rank: int, barrier: threading.Barrier, out: dict) -> None:
    """One rank: draw, then report its groups. Rank 0 reports rewards; rank 1 has the server score its
    completions with prompt_id and step, so the ledger records the verdicts itself (no report)."""
    with CurriculumClient(url, "sums", timeout_s=60) as cur:
        barrier.wait()
        got = cur.draw(N, draw_id=step, rank=rank, world_size=WORLD)
        assert got.world_size == WORLD and got.draw_id == step
        groups = {}
        for p in got.prompts:
            assert p.prompt and p.answer  # the prompt fields a trainer needs came with the draw
            right = outcomes(p.prompt_id, step)
            if rank == 0:
                groups[p.prompt_id] = [1.0 if ok else 0.0 for ok in right]
            else:
                texts = [f"so \\boxed{{{p.answer if ok else 'no'}}}" for ok in right]
                verdicts = cur.verify([{"id": f"{p.prompt_id}-{j}", "domain": "math", "completion": t,
                                        "answer": p.answer, "prompt_id": p.prompt_id, "step": step,
                                        "sample_index": j} for j, t in enumerate(texts)])
                groups[p.prompt_id] = [v.reward for v in verdicts]
        if rank == 0:
            cur.report([{"prompt_id": pid, "rewards": r} for pid, r in groups.items()], step=step)
        out[rank] = groups


def run_steps(url: str, steps: range) -> list[list[dict]]:
    plan = []
    for step in steps:
        out: dict = {}
        barrier = threading.Barrier(WORLD)
        threads = [threading.Thread(target=rank_step, args=(url, step, r, barrier, out)) for r in range(WORLD)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(out) == WORLD, f"a rank failed at step {step}"
        plan.append([out[r] for r in range(WORLD)])
    return plan


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("curriculum")
    write_records(problems(16), folder / "train.parquet")
    write_records(problems(3, prefix="held"), folder / "heldout.parquet")
    return folder


def register(url: str, files) -> bool:
    with CurriculumClient(url, "sums") as cur:
        return cur.register(parquet=str(files / "train.parquet"), heldout_parquet=str(files / "heldout.parquet"),
                            seed=2, curriculum=SETTINGS).created


def stop(server: ServerProcess, how: str) -> None:
    """SIGTERM (drain, flush the ledger, exit 0) or SIGKILL (the ledger reopens from its WAL); a killed
    server's verifier processes are killed after it."""
    if how == "sigterm":
        assert server.stop() == 0
        return
    children = descendants(server.proc.pid)
    server.stop(signal.SIGKILL)
    for pid in children:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_two_ranks_through_retirement_and_a_server_restart(tmp_path, files, how):
    ledger = tmp_path / "ledger.duckdb"
    server = ServerProcess("--ledger", str(ledger)).start()
    try:
        assert register(server.url, files) and not register(server.url, files)  # every rank may register
        plan = run_steps(server.url, range(RESTART_AT))
    finally:
        stop(server, how)
    server = ServerProcess("--ledger", str(ledger)).start()  # the same file: sets and sampler state resume
    try:
        assert not register(server.url, files)
        with CurriculumClient(server.url, "sums") as cur:  # an answered draw is answered the same after the restart
            again = cur.draw(N, draw_id=RESTART_AT - 1, rank=1, world_size=WORLD)
            assert [p.prompt_id for p in again.prompts] == list(plan[-1][1])
        plan += run_steps(server.url, range(RESTART_AT, STEPS))
        with CurriculumClient(server.url, "sums") as cur:
            state = cur.state()
    finally:
        assert server.stop() == 0

    retired_at: dict[str, int] = {}
    for step, ranks in enumerate(plan):
        drawn = [pid for groups in ranks for pid in groups]
        assert len(drawn) == WORLD * N == len(set(drawn)), f"draw {step} gave a prompt to two ranks: {ranks}"
        assert not [pid for pid in drawn if pid.startswith("held")]
        assert not [pid for pid in drawn if retired_at.get(pid, step) < step], f"retired prompt drawn at {step}"
        retired_at.update({pid: step for pid in drawn if pid in EASY and pid not in retired_at})
    assert set(retired_at) == EASY == set(state.retired_ids)  # retired by reports and by recorded verdicts
    assert state.summary.draws == STEPS and state.summary.heldout == 3 and state.domains["math"].active == 12

    # The plan resumed: the same draws as an uninterrupted service fed the same outcomes.
    with Ledger(tmp_path / "reference.duckdb") as reference:
        service = CurriculumService(reference)
        with Ledger(ledger, read_only=True) as served:
            members = service_members(served)
        service.register("sums", members, seed=2, curriculum=SETTINGS)
        for step, ranks in enumerate(plan):
            drawn = [[p.prompt_id for p in service.get("sums").draw(
                DrawRequest(draw_id=step, rank=r, world_size=WORLD, n=N)).prompts] for r in range(WORLD)]
            assert drawn == [list(groups) for groups in ranks], f"draw {step} differs from the uninterrupted plan"
            service.get("sums").report(ReportRequest(groups=[{"prompt_id": pid, "rewards": rewards}
                                                             for groups in ranks for pid, rewards in groups.items()],
                                                     step=step))


def service_members(ledger: Ledger):
    from scalerl.curriculum.ledger.sets import load_members
    from scalerl.curriculum.service import Member

    return [Member.from_row(row) for row in load_members(ledger, "sums")]


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    return shared_server(request, "curriculum", "--ledger", str(tmp_path_factory.mktemp("cur") / "l.duckdb"))


def post(url: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=60)


def test_errors_are_typed_and_name_the_field(server, files):
    register(server.url, files)
    base = "/v1/curriculum/sets"
    cases = [
        (f"{base}/sums/draw", {"draw_id": 0, "rank": 2, "world_size": 2, "n": 1}, "rank"),
        (f"{base}/sums/draw", {"draw_id": 0, "n": 0}, "n"),
        (f"{base}/sums/draw", {"draw_id": 0, "rank": False, "n": 1}, "rank"),
        (f"{base}/sums/draw", {"draw_id": "0", "n": 1}, "draw_id"),
        (f"{base}/sums/report", {"groups": [{"prompt_id": "a", "rewards": [True]}]}, "groups.0.rewards.0"),
        (f"{base}/sums/report", {"groups": [{"prompt_id": "a", "rewards": [1.0]}], "step": False}, "step"),
        (base, {"name": "x", "records": [{"prompt_id": "a", "domain": "math"}], "curriculum": {"skip.mode": "all"}},
         "curriculum.skip.mode"),
        (base, {"name": "x"}, "records"),
        (base, {"name": "x", "records": [{"prompt_id": "a", "domain": "math", "prompt": [
            {"role": "user", "content": "1+1?"}]}]}, "records.0"),
    ]
    for path, body, field in cases:
        response = post(server.url, path, body)
        assert response.status_code == 422, (path, body, response.text)
        assert [e["field"] for e in response.json()["detail"]][0].startswith(field), response.json()
    for path, body, field in [  # well formed, naming what is not there: 404, the detail starting with the field
            (f"{base}/sums/report", {"groups": [{"prompt_id": "nope", "rewards": [1.0]}]}, "groups.0.prompt_id"),
            (base, {"name": "x", "parquet": str(files / "missing.parquet")}, "parquet")]:
        response = post(server.url, path, body)
        assert response.status_code == 404 and response.json()["detail"].startswith(field + ": "), response.text
    missing = post(server.url, f"{base}/nothing/draw", {"draw_id": 0, "n": 1})
    assert missing.status_code == 404 and "sums" in missing.json()["detail"]
    assert httpx.get(server.url + f"{base}/nothing").status_code == 404
    assert post(server.url, base, {"name": "sums", "parquet": str(files / "train.parquet")}).status_code == 409
    assert post(server.url, f"{base}/sums/draw", {"draw_id": 50, "n": 100}).status_code == 409  # > active prompts
    with CurriculumClient(server.url, "sums") as cur:
        assert [s.name for s in cur.list_sets()] == ["sums"]
        cur.draw(2, draw_id=60, world_size=2)
        with pytest.raises(RewardServerError) as err:
            cur.draw(1, draw_id=60, world_size=2)  # the draw exists with n=2
        assert err.value.status == 409 and "n=2" in str(err.value.detail)


def test_ids_only_sets_are_served_too(server):
    with CurriculumClient(server.url, "ids") as cur:
        records = [{"prompt_id": f"id{i}", "domain": "math", "source": "mine"} for i in range(6)]
        assert cur.register(records=records + [{"prompt_id": "v0", "domain": "math", "split": "heldout"}]).created
        got = cur.draw(3, draw_id=0)
        assert len({p.prompt_id for p in got.prompts}) == 3 and all(p.prompt is None for p in got.prompts)
        out = cur.report([{"prompt_id": got.prompts[0].prompt_id, "rewards": [1.0, 1.0, 1.0, 1.0]}], step=0)
        assert out.retired == [got.prompts[0].prompt_id] and out.recorded == 4


def test_without_a_ledger_the_routes_answer_409(request):
    bare = shared_server(request, "overload", *OVERLOAD)  # the load tests' ledger-less server
    response = post(bare.url, "/v1/curriculum/sets/x/draw", {"draw_id": 0, "n": 1})
    assert response.status_code == 409 and "--ledger" in response.json()["detail"]
    assert httpx.get(bare.url + "/v1/curriculum/sets").status_code == 409


def test_parquet_sets_keep_a_repeated_problem_once_and_held_out_wins(server, files):
    """As `scalerl train` reads data: the first row of a repeated prompt_id, held-out prompts leave training."""
    rows = problems(6, prefix="dup")
    write_records(rows + rows[:2], files / "repeated.parquet")
    write_records(rows[4:], files / "held-dup.parquet")
    with CurriculumClient(server.url, "dups") as cur:
        got = cur.register(parquet=str(files / "repeated.parquet"), heldout_parquet=str(files / "held-dup.parquet"))
        assert (got.train, got.heldout) == (4, 2)
        drawn = {p.prompt_id for p in cur.draw(4, draw_id=0).prompts}
        assert drawn == {f"dup{i}" for i in range(4)}
