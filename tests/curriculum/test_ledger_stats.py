"""`prompt_stats` and the `pass_rates` view over it: equal to the aggregate over every attempt after random
batches (steps missing, several steps per batch, verifier errors, truncation, compactions), unchanged by a
reopen, and a version-2 file migrates to the same pass rates it showed before."""

from __future__ import annotations

import math
import random

import duckdb
import pytest
import scalerl.curriculum.ledger.store as ledger_module
from scalerl.curriculum.ledger.retirement import RetirementConfig
from scalerl.curriculum.ledger.schema import NO_STEP, SCHEMA_VERSION, STATS_FROM_ATTEMPTS, V1_DDL, V2_DDL
from scalerl.curriculum.ledger.store import Ledger

VIEW = ("prompt_id", "domain", "attempts", "scored", "correct", "truncated", "pass_rate", "reward_mean", "first_step",
        "last_step", "last_group_step", "last_group_scored", "last_group_correct", "last_group_pass_rate", "retired",
        "retired_step", "retired_epoch", "last_seen_at")

# The view as version-2 code created it (it aggregated `attempts` on every read); a v2 file holds this.
V2_VIEW = f"""
CREATE OR REPLACE VIEW pass_rates AS
WITH p AS ({STATS_FROM_ATTEMPTS})
SELECT p.prompt_id, p.domain, p.attempts, p.scored, p.correct, p.truncated,
       p.correct / nullif(p.scored, 0) AS pass_rate, p.reward_sum / p.attempts AS reward_mean,
       p.first_step, p.last_step, nullif(p.last_group_step, {NO_STEP}) AS last_group_step,
       p.last_group_scored, p.last_group_correct,
       p.last_group_correct / nullif(p.last_group_scored, 0) AS last_group_pass_rate,
       r.prompt_id IS NOT NULL AS retired, r.step AS retired_step, r.epoch AS retired_epoch, p.last_seen_at
FROM p LEFT JOIN retirements r USING (prompt_id);
CREATE OR REPLACE VIEW retired AS
SELECT prompt_id, domain, seq, step, epoch, pass_rate, window_samples, threshold, retired_at
FROM retirements ORDER BY seq;
"""


def random_batch(rng: random.Random, prompts: int) -> list[dict]:
    steps = rng.sample([None, 0, 1, 2, 3, 5, 8], rng.randint(1, 3))  # often several steps in one batch
    return [{"prompt_id": f"p{rng.randrange(prompts)}", "domain": "math", "step": rng.choice(steps),
             "status": rng.choice(["correct", "correct", "wrong", "error", "timeout"]),
             "reward": rng.choice([None, 0.25, -1.0, 2.0]), "truncated": rng.choice([None, True, False])}
            for _ in range(rng.randint(1, 30))]


def rows(con_or_ledger, sql: str) -> dict[str, tuple]:
    out = con_or_ledger.query(sql).rows if isinstance(con_or_ledger, Ledger) else con_or_ledger.execute(sql).fetchall()
    return {r[0]: tuple(r) for r in out}


def same(a: dict[str, tuple], b: dict[str, tuple]) -> bool:
    """Equal, the float columns to rounding (sums taken in a different order)."""
    return a.keys() == b.keys() and all(
        len(x) == len(y) and all(u == v or (isinstance(u, float) and math.isclose(u, v, rel_tol=1e-12))
                                 for u, v in zip(x, y)) for k in a for x, y in [(a[k], b[k])])


def test_view_equals_the_aggregate_over_attempts_through_compactions(tmp_path, monkeypatch):
    monkeypatch.setattr(ledger_module, "STATS_SLACK_MIN", 6)  # compact every few batches
    rng = random.Random(7)
    path = tmp_path / "l.duckdb"
    reference = f"SELECT {', '.join(VIEW[:6])}, correct / nullif(scored, 0), reward_sum / attempts, first_step, " \
                f"last_step, nullif(last_group_step, {NO_STEP}), last_group_scored, last_group_correct " \
                f"FROM ({STATS_FROM_ATTEMPTS})"
    view = f"SELECT {', '.join(VIEW[:13])} FROM pass_rates"
    with Ledger(path, retirement=RetirementConfig(threshold=0.8)) as ledger:
        compactions = 0
        for _ in range(60):
            before = ledger.query("SELECT count(*) FROM prompt_stats").rows[0][0]
            ledger.record_attempts(random_batch(rng, 12))
            compactions += ledger.query("SELECT count(*) FROM prompt_stats").rows[0][0] < before
            assert same(rows(ledger, view), rows(ledger, reference))
            assert dict(ledger.query("SELECT prompt_id, seq FROM retirements").rows) == ledger.retired_seq()
        assert compactions >= 3
        (stored, prompts), = ledger.query("SELECT count(*), count(DISTINCT prompt_id) FROM prompt_stats").rows
        assert stored - prompts <= max(6, prompts // ledger_module.STATS_SLACK_FRACTION)
        seen = ledger.query("SELECT prompt_id, max(created_at) FROM attempts GROUP BY ALL").rows
        assert dict(seen) == {pid: r[-1] for pid, r in rows(ledger, "SELECT prompt_id, last_seen_at FROM pass_rates")
                              .items()}
        live = rows(ledger, "SELECT * FROM pass_rates")
    for read_only in (True, False):
        with Ledger(path, read_only=read_only, retirement=RetirementConfig(threshold=0.8)) as reopened:
            assert rows(reopened, "SELECT * FROM pass_rates") == live


def test_a_failed_write_leaves_no_stats_behind(tmp_path):
    with Ledger(tmp_path / "l.duckdb") as ledger:
        ledger.record_attempts([{"prompt_id": "a", "domain": "math", "status": "wrong", "step": 1}])
        before = rows(ledger, "SELECT * FROM prompt_stats")
        ledger._con.execute("ALTER TABLE prompt_stats RENAME TO stats_aside")  # the stats insert of the
        ledger._con.execute("CREATE VIEW prompt_stats AS SELECT * FROM stats_aside")  # next commit fails
        with pytest.raises(ledger_module.LedgerError, match="rolled back"):
            ledger.record_attempts([{"prompt_id": "a", "domain": "math", "status": "correct", "step": 2}])
        ledger._con.execute("DROP VIEW prompt_stats")
        ledger._con.execute("ALTER TABLE stats_aside RENAME TO prompt_stats")
        assert rows(ledger, "SELECT * FROM prompt_stats") == before
        assert ledger.query("SELECT count(*) FROM attempts").rows == [[1]]
        assert ledger.pass_rates()["a"].attempts == 1


def make_v2(path) -> tuple[dict[str, tuple], list[tuple]]:
    """A version-2 ledger with history and a retirement; returns what its pass_rates and retired views showed."""
    rng = random.Random(3)
    con = duckdb.connect(str(path))
    con.execute(V1_DDL)
    con.execute(V2_DDL)
    con.execute(V2_VIEW)
    con.execute("INSERT INTO ledger_meta VALUES ('schema_version', '2')")
    for step in range(6):
        for _ in range(rng.randint(20, 40)):
            status = rng.choice(["correct", "wrong", "error"])
            con.execute("INSERT INTO attempts (prompt_id, domain, step, reward, status, correct, truncated) "
                        "VALUES (?, 'math', ?, ?, ?, ?, ?)",
                        [f"p{rng.randrange(9)}", rng.choice([step, None]), rng.random(), status, status == "correct",
                         rng.choice([True, False, None])])
    con.execute("INSERT INTO retirements (prompt_id, domain, seq, step, epoch, pass_rate, window_samples, threshold)"
                " VALUES ('p1', 'math', 1, 3, 0, 1.0, 2, 0.9)")
    shown = rows(con, "SELECT * FROM pass_rates")
    retired = con.execute("SELECT * FROM retired").fetchall()
    con.close()
    return shown, retired


def test_a_version_2_file_migrates_to_the_same_pass_rates(tmp_path):
    path = tmp_path / "v2.duckdb"
    shown, retired = make_v2(path)
    with Ledger(path, retirement=RetirementConfig(enabled=False)) as ledger:
        assert ledger.migrated_from == 2
        assert [tuple(r) for r in ledger.query("SELECT * FROM retired").rows] == retired
        assert ledger.query("SELECT table_type FROM information_schema.tables WHERE table_name = 'retirements'"
                            ).rows == [["VIEW"]]  # the version-3 table moved into prompt_stats
        version = ledger.query("SELECT value FROM ledger_meta WHERE key = 'schema_version'").rows
        assert version == [[str(SCHEMA_VERSION)]]
        assert same(rows(ledger, "SELECT * FROM pass_rates"), shown)
        index = {pid: (r.attempts, r.scored, r.correct, r.last_group_step, r.retired) for pid, r in
                 ledger.pass_rates().items()}
        assert index == {pid: (r[2], r[3], r[4], r[10], r[14]) for pid, r in shown.items()}
        ledger.record_attempts([{"prompt_id": "p0", "domain": "math", "status": "correct", "step": 9}])
        after = rows(ledger, "SELECT * FROM pass_rates")["p0"]
        assert (after[2], after[10], after[11], after[12]) == (shown["p0"][2] + 1, 9, 1, 1)
    with Ledger(path, read_only=True) as reopened:
        assert rows(reopened, "SELECT * FROM pass_rates")["p0"] == after


def test_retirements_ride_on_every_later_stats_row_and_survive_a_reopen(tmp_path, monkeypatch):
    monkeypatch.setattr(ledger_module, "STATS_SLACK_MIN", 10**9)  # no compaction: every row stays to be checked
    rng = random.Random(11)
    path = tmp_path / "l.duckdb"
    config = RetirementConfig(threshold=0.6, min_samples=2, window="all")
    sql = "SELECT prompt_id, seq, step FROM retirements"
    with Ledger(path, retirement=config) as ledger:
        for _ in range(40):
            ledger.record_attempts(random_batch(rng, 12))
        seq = ledger.retired_seq()
        assert 2 <= len(seq) < 12  # some retired, and later batches wrote rows for retired prompts too
        stored = {pid: (s, step) for pid, s, step in ledger.query(sql).rows}
        assert {pid: s for pid, (s, _) in stored.items()} == seq
        assert sorted(seq.values()) == list(range(1, len(seq) + 1))
        assert {pid: r.retired_step for pid, r in ledger.pass_rates().items() if r.retired} == \
            {pid: step for pid, (_, step) in stored.items()}
        (carried,), = ledger.query("SELECT count(*) FILTER (WHERE retired_seq IS NOT NULL) > "
                                            "count(DISTINCT prompt_id) FILTER (WHERE retired_seq IS NOT NULL) "
                                            "FROM prompt_stats").rows
        assert carried  # rows written after a retirement carry it too
    with Ledger(path, retirement=config) as reopened:
        assert reopened.retired_seq() == seq
        assert {pid: (s, step) for pid, s, step in reopened.query(sql).rows} == stored
