"""The counts the curriculum strategies read from a ledger: one SELECT each, through `Ledger.query`.

A *group* is a prompt's scored samples at one step (`status <> 'error'`), as in the `pass_rates`
view; zero-variance is judged on the recorded `reward` (all equal), "all correct"/"all wrong" on the
`correct` flags. Each function works on the owner's `Ledger` or its Ray proxy (both answer `query`),
never writes, and returns plain Python values for `scalerl.curriculum.strategies`. The SQL strings are public
so docs/curriculum.md shows (and tests/curriculum/test_strategy_docs.py runs) exactly what the
strategies see. Not guaranteed: speed on very large ledgers (each call scans `attempts`; the sampler
calls the ones its active strategies need once per batch).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MAX_ROWS = 10_000_000

GROUPS = """groups AS (
    SELECT prompt_id, any_value(domain) AS domain, coalesce(step, -1) AS step,
           count(*) AS scored, count(*) FILTER (WHERE correct) AS correct,
           min(reward) = max(reward) AS zero_variance
    FROM attempts WHERE status <> 'error' GROUP BY prompt_id, coalesce(step, -1))"""

LAST_K_SQL = """WITH {groups}, ranked AS (
    SELECT *, row_number() OVER (PARTITION BY prompt_id ORDER BY step DESC) AS back FROM groups)
SELECT prompt_id, sum(correct)::BIGINT AS correct, sum(scored)::BIGINT AS scored
FROM ranked WHERE back <= {k} GROUP BY prompt_id"""

STREAK_SQL = """WITH {groups}, last_informative AS (
    SELECT prompt_id, max(step) FILTER (WHERE NOT zero_variance) AS step FROM groups GROUP BY prompt_id)
SELECT g.prompt_id, count(*) AS streak, arg_max(g.correct = g.scored, g.step) AS all_correct
FROM groups g JOIN last_informative l USING (prompt_id)
WHERE g.zero_variance AND g.step > coalesce(l.step, -2)
GROUP BY g.prompt_id"""

STEP_OUTCOMES_SQL = """WITH {groups}
SELECT step, count(*) FILTER (WHERE zero_variance AND correct = scored) AS all_correct,
       count(*) FILTER (WHERE zero_variance AND correct < scored) AS all_wrong, count(*) AS groups
FROM groups WHERE step >= 0 GROUP BY step ORDER BY step"""

DOMAIN_PROGRESS_SQL = """WITH {groups}, ranked AS (
    SELECT *, correct / scored AS p,
           row_number() OVER (PARTITION BY domain ORDER BY step DESC, prompt_id) AS back,
           count(*) OVER (PARTITION BY domain) AS n
    FROM groups WHERE step >= 0 AND scored > 0)
SELECT domain, avg(2 * p * (1 - p)) FILTER (WHERE back <= {window}) AS progress, any_value(n) AS groups
FROM ranked GROUP BY domain ORDER BY domain"""

# A stage's groups are the ones drawn in its batches, counted in groups, not in steps: a step trains more
# groups than one batch under refill. Steps are taken in order; a step belongs to the stage when the
# groups recorded before it lie in [lo, hi) (so the step that crosses the boundary counts for the stage).
STAGE_RATES_SQL = """WITH groups AS (
    SELECT prompt_id, step, count(*) FILTER (WHERE status <> 'error') AS scored,
           count(*) FILTER (WHERE correct) AS correct
    FROM attempts WHERE step > 0 GROUP BY prompt_id, step),
steps AS (SELECT step, sum(count(*)) OVER (ORDER BY step) - count(*) AS before FROM groups GROUP BY step)
SELECT prompt_id, sum(correct) / sum(scored) AS pass_rate
FROM groups g JOIN steps s USING (step)
WHERE s.before >= {lo} AND s.before < {hi} AND g.scored > 0 GROUP BY prompt_id"""
RECORDED_GROUPS_SQL = "SELECT count(DISTINCT (prompt_id, step)) FROM attempts WHERE step > 0"


def _rows(ledger: Any, sql: str) -> list[list[Any]]:
    return ledger.query(sql, max_rows=MAX_ROWS).rows


def last_k_windows(ledger: Any, k: int) -> dict[str, tuple[int, int]]:
    """prompt_id -> (correct, scored) over its last k groups."""
    return {pid: (int(c), int(s)) for pid, c, s in _rows(ledger, LAST_K_SQL.format(groups=GROUPS, k=int(k)))}


def zero_variance_streaks(ledger: Any) -> dict[str, tuple[int, bool]]:
    """prompt_id -> (number of its latest groups in a row that were zero-variance, latest all correct);
    prompts whose latest group had variance are absent."""
    return {pid: (int(n), bool(ok)) for pid, n, ok in _rows(ledger, STREAK_SQL.format(groups=GROUPS))}


def step_outcomes(ledger: Any) -> list[tuple[int, int, int]]:
    """[(all-correct groups, all-wrong groups, groups)] per step, in step order."""
    return [(int(a), int(b), int(n)) for _, a, b, n in _rows(ledger, STEP_OUTCOMES_SQL.format(groups=GROUPS))]


def domain_progress(ledger: Any, window: int) -> dict[str, tuple[float, int]]:
    """domain -> (mean 2p(1-p) over its last `window` groups, groups so far)."""
    rows = _rows(ledger, DOMAIN_PROGRESS_SQL.format(groups=GROUPS, window=int(window)))
    return {d: (float(lp or 0.0), int(n)) for d, lp, n in rows}


def stage_pass_rates(ledger: Any, after_groups: int, up_to_groups: int) -> tuple[dict[str, float], int]:
    """(prompt_id -> pass rate over the groups numbered (after_groups, up_to_groups] in step order, groups
    recorded so far): the samples of a stage whose batches drew those groups; the stage is complete in
    the ledger once the second value reaches `up_to_groups`."""
    rows = _rows(ledger, STAGE_RATES_SQL.format(lo=int(after_groups), hi=int(up_to_groups)))
    recorded = int(_rows(ledger, RECORDED_GROUPS_SQL)[0][0])
    return {pid: float(r) for pid, r in rows}, recorded


def profile_prior(path: str | Path) -> dict[str, float]:
    """prompt_id -> pass rate over every scored sample of a profile ledger (opened read-only)."""
    from scalerl.curriculum.ledger.store import Ledger

    with Ledger(path, read_only=True) as ledger:
        return {pid: r.pass_rate for pid, r in ledger.pass_rates().items() if r.pass_rate is not None}
