"""Ledger readers for the dashboard, over any object with the ledger's read-only `query(sql)`.

Guaranteed: only `SELECT`s through `Ledger.query` (read-only, time-limited); text from the page goes in
as an escaped SQL string literal; every list is bounded (histograms: at most `MAX_HIST_STEPS` steps;
search: `limit` rows; a prompt's history: `MAX_HISTORY_STEPS` steps; sources: 200 rows).
The pass-rate histogram's bins are the rates one group can have, k/n for n samples per prompt (the run's
`pipeline.samples_per_prompt`, else the ledger's most common group size, else 10); a prompt with more
samples falls in the bin of the nearest k/n. "benched" counts are given only when the run benches prompts.
Not guaranteed: counts of a live ledger agree across two calls (each is its own snapshot); "benched" is
read from the attempts alone (drawn, not retired, no attempt in the last quarter of the steps), not from
the curriculum strategy's own state.
"""

from __future__ import annotations

import json
from typing import Any

from scalerl.env.dashboard import models as m

MAX_HIST_STEPS = 12
MAX_HISTORY_STEPS = 1000
FALLBACK_SAMPLES = 10  # bins of 0.1 when neither the run nor the ledger says how many samples a group has


def _q(ledger: Any, sql: str) -> list[list[Any]]:
    return ledger.query(sql).rows


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def counts(ledger: Any, bench: bool = False) -> list[m.DomainCounts]:
    """Per domain: prompts, attempts, retired, never drawn; benched only when `bench` (the run benches)."""
    rows = _q(ledger, """
        WITH last AS (SELECT coalesce(max(step), 0) AS s FROM attempts),
             pr AS (SELECT * FROM pass_rates)
        SELECT p.domain, count(*) AS prompts,
               coalesce(sum(pr.attempts), 0) AS attempts,
               count(*) FILTER (WHERE pr.retired) AS retired,
               count(*) FILTER (WHERE pr.prompt_id IS NULL) AS never_drawn,
               count(*) FILTER (WHERE pr.prompt_id IS NOT NULL AND NOT pr.retired
                                AND pr.last_step < (SELECT s FROM last) * 3 / 4) AS benched
        FROM problems p LEFT JOIN pr USING (prompt_id) GROUP BY p.domain ORDER BY p.domain""")
    return [m.DomainCounts(domain=r[0], prompts=r[1], attempts=int(r[2]), retired=r[3], never_drawn=r[4],
                           benched=r[5] if bench else None) for r in rows]


def group_size(ledger: Any) -> int | None:
    """The most common number of attempts of one prompt at one step (the samples per prompt of its groups), or
    None when that is below 2 (a group has at least 2 samples: these attempts were not recorded as groups)."""
    rows = _q(ledger, """SELECT n FROM (SELECT count(*) AS n FROM attempts WHERE step IS NOT NULL
                                       GROUP BY prompt_id, step) GROUP BY n ORDER BY count(*) DESC, n DESC LIMIT 1""")
    return int(rows[0][0]) if rows and rows[0][0] >= 2 else None


def bin_labels(samples: int) -> list[str]:
    return [f"{k}/{samples}" for k in range(samples + 1)]


def histograms(ledger: Any, samples: int) -> list[m.Histogram]:
    """Per domain, at up to MAX_HIST_STEPS evenly spaced steps, prompts per pass-rate bin k/`samples` (the
    nearest one to the pass rate of the attempts so far)."""
    pick = [r[0] for r in _q(ledger, f"""
        WITH s AS (SELECT DISTINCT step FROM attempts WHERE step IS NOT NULL),
             r AS (SELECT step, row_number() OVER (ORDER BY step) - 1 AS i, count(*) OVER () AS n FROM s)
        SELECT DISTINCT r.step FROM r, range({MAX_HIST_STEPS}) t(k)
        WHERE r.i = CAST(round(t.k * (r.n - 1) / {MAX_HIST_STEPS - 1}) AS BIGINT) ORDER BY 1""")]
    if not pick:
        return []
    values = ", ".join(f"({int(s)})" for s in pick)
    rows = _q(ledger, f"""
        WITH cut(s) AS (VALUES {values}),
             per AS (SELECT cut.s, a.domain, a.prompt_id,
                            avg(CASE WHEN a.correct THEN 1.0 ELSE 0.0 END) AS pr
                     FROM attempts a JOIN cut ON a.step <= cut.s WHERE a.status <> 'error'
                     GROUP BY cut.s, a.domain, a.prompt_id)
        SELECT s, domain, CAST(round(pr * {int(samples)}) AS INTEGER) AS bin, count(*)
        FROM per GROUP BY ALL ORDER BY ALL""")
    out: dict[tuple[str, int], list[int]] = {}
    for s, dom, b, n in rows:
        out.setdefault((dom, int(s)), [0] * (samples + 1))[b] = int(n)
    return [m.Histogram(domain=d, step=s, counts=c) for (d, s), c in sorted(out.items())]


def sources(ledger: Any) -> list[m.SourceDifficulty]:
    """Per source and domain (at most 200): prompts, how many were drawn, their mean pass rate, the mean prior."""
    rows = _q(ledger, """SELECT p.source, p.domain, count(*), count(pr.prompt_id), avg(pr.pass_rate),
                                avg(p.difficulty_prior)
                         FROM problems p LEFT JOIN pass_rates pr USING (prompt_id)
                         GROUP BY ALL ORDER BY ALL LIMIT 200""")
    return [m.SourceDifficulty(source=r[0], domain=r[1], prompts=r[2], drawn=r[3], mean_pass_rate=r[4], prior=r[5])
            for r in rows]


def view(ledger: Any | None, reason: str | None = None, settings: m.RunSettings | None = None) -> m.LedgerView:
    """The Ledger page; `settings` (the run's, when there is a run folder) decide the bins and the benched counts."""
    if ledger is None:
        return m.LedgerView(available=False, reason=reason or "no ledger")
    settings = settings or m.RunSettings()
    samples = settings.samples_per_prompt or group_size(ledger) or FALLBACK_SAMPLES
    total = int(_q(ledger, "SELECT count(*) FROM attempts")[0][0])
    return m.LedgerView(available=True, attempts=total, bins=bin_labels(samples), counts=counts(ledger, settings.bench),
                        histograms=histograms(ledger, samples), sources=sources(ledger))


def texts(ledger: Any, prompt_ids: list[str]) -> dict[str, str]:
    """prompt_id → prompt text for the given ids (one query; ids absent from `problems` are left out)."""
    ids = sorted(set(prompt_ids))[:1000]
    if not ids:
        return {}
    rows = _q(ledger, f"SELECT prompt_id, CAST(prompt AS VARCHAR) FROM problems "
                      f"WHERE prompt_id IN ({', '.join(_lit(i) for i in ids)})")
    return {r[0]: prompt_text(r[1]) for r in rows}


def prompt_text(raw: Any) -> str:
    """The prompt's chat messages as one text (user content joined)."""
    try:
        msgs = json.loads(raw) if isinstance(raw, str) else raw
        return "\n".join(str(x.get("content", "")) for x in msgs)
    except (TypeError, ValueError, AttributeError):
        return str(raw)


def search(ledger: Any, text: str, limit: int = 20) -> list[m.PromptHit]:
    """Prompts whose id starts with, or whose text contains, `text` (case-insensitive); most attempts first."""
    pat = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = _q(ledger, f"""
        SELECT p.prompt_id, p.domain, CAST(p.prompt AS VARCHAR), coalesce(pr.attempts, 0) AS n
        FROM problems p LEFT JOIN pass_rates pr USING (prompt_id)
        WHERE p.prompt_id ILIKE {_lit(pat + '%')} ESCAPE '\\'
           OR CAST(p.prompt AS VARCHAR) ILIKE {_lit('%' + pat + '%')} ESCAPE '\\'
        ORDER BY n DESC, p.prompt_id LIMIT {int(limit)}""")
    return [m.PromptHit(prompt_id=r[0], domain=r[1], text=prompt_text(r[2])[:300], attempts=int(r[3])) for r in rows]


def history(ledger: Any, prompt_id: str) -> m.PromptHistory | None:
    """One prompt's counts, retirement and attempts per step (at most MAX_HISTORY_STEPS steps, latest kept)."""
    head = _q(ledger, f"""SELECT p.prompt_id, p.domain, p.source, CAST(p.prompt AS VARCHAR),
                                 coalesce(pr.attempts, 0), pr.pass_rate, coalesce(pr.retired, false), pr.retired_step
                          FROM problems p LEFT JOIN pass_rates pr USING (prompt_id)
                          WHERE p.prompt_id = {_lit(prompt_id)}""")
    if not head:
        return None
    pid, dom, src, raw, n, rate, retired, retired_step = head[0]
    steps = _q(ledger, f"""SELECT * FROM (
                             SELECT step, count(*), count(*) FILTER (WHERE correct) FROM attempts
                             WHERE prompt_id = {_lit(prompt_id)} GROUP BY step
                             ORDER BY step DESC NULLS LAST LIMIT {MAX_HISTORY_STEPS}) ORDER BY 1 NULLS FIRST""")
    return m.PromptHistory(prompt_id=pid, domain=dom, source=src, text=prompt_text(raw), attempts=int(n),
                           pass_rate=rate, retired=bool(retired), retired_step=retired_step,
                           steps=[m.PromptStep(step=s, attempts=a, correct=c) for s, a, c in steps])
