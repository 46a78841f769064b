"""The ledger's DuckDB schema: tables, views, the version stamp and the migrations between versions.

Version history (stored in `ledger_meta.schema_version`):
- 1: `ledger_meta`, `problems`, `attempts` (pass rates computed ad hoc).
- 2: adds `retirements` (permanent, with the step, epoch and sequence number of each retirement),
  `ingests` (sha256 of every bulk-imported file: a second import of the same file is refused),
  `sampler_state` / `epochs` (what the sampler needs to resume), attempt columns `item_id` and
  `elapsed_s`, and the views `pass_rates` and `retired`.
- 3: adds `prompt_stats`, the per-prompt counts `pass_rates` reads, so a lookup touches one row per
  prompt instead of every attempt; the migration fills it from `attempts` (`STATS_FROM_ATTEMPTS`).
- 4: a retirement is carried by the prompt's `prompt_stats` rows (`retired_*` columns) instead of a table
  of its own: a commit writes one statement less and `pass_rates` joins nothing. `retirements` is now a
  view with the same columns (SQL written against the table keeps working); the migration moves each
  retirement into its prompt's rows and drops the table.
- 5: attempt column `rule` (nullable): what decided the verdict (`Verdict.details["rule"]`, e.g.
  `math_verify`, `parts`, `rounded`), so rewards can be counted per rule in SQL; older rows keep NULL.
- 6: the curriculum service's tables (`scalerl.curriculum.service`): `curriculum_sets` (each registered problem
  set: seed, domain weights, its `curriculum.*` settings), `curriculum_members` (the set's prompts, their
  split and, when registered with them, the whole problem record) and `curriculum_draws` (every draw
  handed out: the prompts of each `draw_id`, so a repeated request gets the same answer after a restart).
  The sampler of a set keeps its state in `sampler_state` under the set's name (`curriculum/NAME`).
- 7: adds `idempotency` (idempotency key, item index → prompt_id and the verdict recorded), written in
  the same transaction as the attempts it admits (`scalerl.curriculum.ledger.idempotency`); older files start
  with it empty (their attempts were recorded without keys).
- 8: verifier versions and re-scoring. Attempt columns `attempt_id` (a stable identity, filled from the
  sequence `attempt_ids`; the migration numbers older rows in storage order), `verifier_version` and
  `settings_digest` (stamped on every verdict by `scalerl.verifiers.batch.VerifierPool`), `completion`
  (the scored text, kept only with `ledger.store_completions`), and the nullable detail columns
  `second_opinion` ('accepts' / 'rejects' / null = not re-checked), `turns` and `tool_calls` (multi-turn
  episodes). Table `rescores` (a stored completion scored again by another verifier version, beside the
  original, which is never overwritten), views `verdicts` (original and re-scored verdicts, one per
  attempt and verifier version) and `version_pass_rates` (pass rates per verifier version). Older rows
  keep NULL in the new columns.

Opening a file of an older version migrates it in one transaction (`MIGRATIONS`); a file of a newer
version is refused with `LedgerSchemaError` (this code cannot know what the newer one means).

`pass_rates` is the one definition of a prompt's statistics, and `STATS_FROM_ATTEMPTS` says what it
means in terms of `attempts`:
- `scored` excludes `status = 'error'` (the verifier failed, not the model; `scalerl.env.contracts.records.Status`);
  `pass_rate = correct / scored`.
- The "last group" is the prompt's samples at its most recent step (`coalesce(step, -1)`, so samples
  without a step form one group); `last_group_pass_rate` is what no-positive resampling compares with
  its threshold under `window = "group"`.

`prompt_stats` is written by the owner in the same transaction as the attempts it counts (one row per
prompt the batch touched, carrying that prompt's new totals and a larger `version`); rows superseded by
a later version are deleted from time to time, and `LATEST_STATS` (the view's source) keeps only the
latest row of each prompt, so readers never see a superseded count. The tests check the view against
`STATS_FROM_ATTEMPTS` after random batches. Not guaranteed: a `prompt_stats` row per prompt at any
moment (read `pass_rates`, not the table).
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb
from scalerl.curriculum.ledger.models import LedgerError

SCHEMA_VERSION = 8
NO_STEP = -1  # the group key of samples recorded without a step

V1_DDL = """
CREATE TABLE IF NOT EXISTS ledger_meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS problems (
    prompt_id VARCHAR PRIMARY KEY, domain VARCHAR NOT NULL, source VARCHAR NOT NULL, prompt JSON NOT NULL,
    answer VARCHAR, tests JSON, difficulty_prior DOUBLE, metadata JSON, added_at TIMESTAMPTZ DEFAULT now());
CREATE TABLE IF NOT EXISTS attempts (
    prompt_id VARCHAR NOT NULL, domain VARCHAR NOT NULL, step BIGINT, policy_version BIGINT,
    sample_index INTEGER, reward DOUBLE NOT NULL, status VARCHAR NOT NULL, correct BOOLEAN NOT NULL,
    truncated BOOLEAN, completion_tokens BIGINT, created_at TIMESTAMPTZ NOT NULL DEFAULT now());
"""

V2_DDL = """
ALTER TABLE attempts ADD COLUMN IF NOT EXISTS item_id VARCHAR;
ALTER TABLE attempts ADD COLUMN IF NOT EXISTS elapsed_s DOUBLE;
CREATE TABLE IF NOT EXISTS retirements (
    prompt_id VARCHAR PRIMARY KEY, domain VARCHAR NOT NULL, seq BIGINT NOT NULL, step BIGINT, epoch BIGINT,
    pass_rate DOUBLE NOT NULL, window_samples BIGINT NOT NULL, threshold DOUBLE NOT NULL,
    retired_at TIMESTAMPTZ NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS ingests (
    sha256 VARCHAR PRIMARY KEY, path VARCHAR NOT NULL, rows BIGINT NOT NULL,
    ingested_at TIMESTAMPTZ NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS sampler_state (
    name VARCHAR PRIMARY KEY, state JSON NOT NULL, updated_at TIMESTAMPTZ NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS epochs (
    sampler VARCHAR NOT NULL, domain VARCHAR NOT NULL, epoch BIGINT NOT NULL, active_prompts BIGINT NOT NULL,
    retired_before BIGINT NOT NULL, started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (sampler, domain, epoch));
"""

# Columns every path into attempts fills (created_at is filled by DuckDB).
ATTEMPT_COLUMNS = (
    "prompt_id", "domain", "step", "policy_version", "sample_index", "reward", "status", "correct",
    "truncated", "completion_tokens", "item_id", "elapsed_s",
)
# Nullable columns taken from a verdict's details when the path has them (null otherwise, and for a value
# of another type); appended after ATTEMPT_COLUMNS in the Arrow batches the ledger appends, with their types.
DETAIL_TYPES = {
    "rule": "VARCHAR", "verifier_version": "VARCHAR", "settings_digest": "VARCHAR", "second_opinion": "VARCHAR",
    "turns": "INTEGER", "tool_calls": "INTEGER",
}
DETAIL_COLUMNS = tuple(DETAIL_TYPES)
# The scored text, taken from the item; stored only when the ledger's `store_completions` is on.
COMPLETION_COLUMN = "completion"
V5_DDL = "ALTER TABLE attempts ADD COLUMN IF NOT EXISTS rule VARCHAR;"

V6_DDL = """
CREATE TABLE IF NOT EXISTS curriculum_sets (
    name VARCHAR PRIMARY KEY, seed BIGINT NOT NULL, domain_weights JSON NOT NULL, settings JSON NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS curriculum_members (
    set_name VARCHAR NOT NULL, prompt_id VARCHAR NOT NULL, domain VARCHAR NOT NULL, source VARCHAR NOT NULL,
    split VARCHAR NOT NULL, record JSON, PRIMARY KEY (set_name, prompt_id));
CREATE TABLE IF NOT EXISTS curriculum_draws (
    set_name VARCHAR NOT NULL, draw_id BIGINT NOT NULL, world_size INTEGER NOT NULL, n INTEGER NOT NULL,
    prompt_ids JSON NOT NULL, batches BIGINT NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (set_name, draw_id));
"""

V7_DDL = """
CREATE TABLE IF NOT EXISTS idempotency (
    key VARCHAR NOT NULL, item_index INTEGER NOT NULL, prompt_id VARCHAR NOT NULL, verdict VARCHAR NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (key, item_index));
"""

# The sequence numbers attempts in insertion order; ADD COLUMN numbers the rows already stored.
V8_DDL = "CREATE SEQUENCE IF NOT EXISTS attempt_ids;\n" + "".join(
    f"ALTER TABLE attempts ADD COLUMN IF NOT EXISTS {name} {kind};\n" for name, kind in (
        ("attempt_id", "BIGINT DEFAULT nextval('attempt_ids')"), *DETAIL_TYPES.items(),
        (COMPLETION_COLUMN, "VARCHAR"))) + """
CREATE TABLE IF NOT EXISTS rescores (
    attempt_id BIGINT NOT NULL, prompt_id VARCHAR NOT NULL, domain VARCHAR NOT NULL,
    verifier_version VARCHAR NOT NULL, settings_digest VARCHAR NOT NULL, status VARCHAR NOT NULL,
    reward DOUBLE NOT NULL, correct BOOLEAN NOT NULL, rule VARCHAR, rescored_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (attempt_id, verifier_version, settings_digest));
"""

V3_DDL = """
CREATE TABLE IF NOT EXISTS prompt_stats (
    prompt_id VARCHAR NOT NULL, version BIGINT NOT NULL, domain VARCHAR NOT NULL, attempts BIGINT NOT NULL,
    scored BIGINT NOT NULL, correct BIGINT NOT NULL, truncated BIGINT NOT NULL, reward_sum DOUBLE NOT NULL,
    first_step BIGINT, last_step BIGINT, last_group_step BIGINT NOT NULL, last_group_scored BIGINT NOT NULL,
    last_group_correct BIGINT NOT NULL, last_seen_at TIMESTAMPTZ NOT NULL);
"""

# A retired prompt's every later prompt_stats row carries its retirement (the latest row is the one read).
RETIRED_COLUMNS = (
    ("retired_seq", "BIGINT"), ("retired_step", "BIGINT"), ("retired_epoch", "BIGINT"),
    ("retired_pass_rate", "DOUBLE"), ("retired_window_samples", "BIGINT"), ("retired_threshold", "DOUBLE"),
    ("retired_at", "TIMESTAMPTZ"),
)
V4_DDL = "".join(f"ALTER TABLE prompt_stats ADD COLUMN IF NOT EXISTS {name} {kind};\n"
                 for name, kind in RETIRED_COLUMNS)
# The version-3 retirements table, moved into the rows of its prompts (all of them: the latest is read).
V4_MOVE_RETIREMENTS = """
UPDATE prompt_stats SET retired_seq = r.seq, retired_step = r.step, retired_epoch = r.epoch,
    retired_pass_rate = r.pass_rate, retired_window_samples = r.window_samples, retired_threshold = r.threshold,
    retired_at = r.retired_at
FROM retirements r WHERE prompt_stats.prompt_id = r.prompt_id;
DROP TABLE retirements;
"""

# What a prompt_stats row means, computed from attempts (the migration's source, and the tests' reference).
STATS_FROM_ATTEMPTS = f"""
WITH groups AS (
    SELECT prompt_id, coalesce(step, {NO_STEP}) AS group_step, any_value(domain) AS domain,
           count(*) AS attempts, count(*) FILTER (WHERE status <> 'error') AS scored,
           count(*) FILTER (WHERE correct) AS correct, count(*) FILTER (WHERE truncated) AS truncated,
           sum(reward) AS reward_sum, min(step) AS first_step, max(step) AS last_step,
           max(created_at) AS last_seen_at
    FROM attempts GROUP BY ALL)
SELECT prompt_id, any_value(domain) AS domain, sum(attempts)::BIGINT AS attempts,
       sum(scored)::BIGINT AS scored, sum(correct)::BIGINT AS correct, sum(truncated)::BIGINT AS truncated,
       sum(reward_sum) AS reward_sum, min(first_step) AS first_step, max(last_step) AS last_step,
       max(group_step) AS last_group_step, arg_max(scored, group_step) AS last_group_scored,
       arg_max(correct, group_step) AS last_group_correct, max(last_seen_at) AS last_seen_at
FROM groups GROUP BY prompt_id"""

# Each prompt's latest prompt_stats row (versions are unique per prompt). A filter on prompt_id is applied
# below the window (DuckDB pushes it through PARTITION BY), so a lookup of a batch of prompts reads only
# their rows; row_number() = 1 plans faster than version = max(version) (3.2 vs 4.1 ms for 48 prompts).
LATEST_STATS = ("SELECT * FROM prompt_stats "
                "QUALIFY row_number() OVER (PARTITION BY prompt_id ORDER BY version DESC) = 1")

VIEWS_DDL = f"""
CREATE OR REPLACE VIEW pass_rates AS
WITH p AS ({LATEST_STATS})
SELECT p.prompt_id, p.domain, p.attempts, p.scored, p.correct, p.truncated,
       p.correct / nullif(p.scored, 0) AS pass_rate, p.reward_sum / p.attempts AS reward_mean,
       p.first_step, p.last_step, nullif(p.last_group_step, {NO_STEP}) AS last_group_step,
       p.last_group_scored, p.last_group_correct,
       p.last_group_correct / nullif(p.last_group_scored, 0) AS last_group_pass_rate,
       p.retired_seq IS NOT NULL AS retired, p.retired_step, p.retired_epoch, p.last_seen_at
FROM p;

CREATE OR REPLACE VIEW retirements AS
SELECT prompt_id, domain, retired_seq AS seq, retired_step AS step, retired_epoch AS epoch,
       retired_pass_rate AS pass_rate, retired_window_samples AS window_samples, retired_threshold AS threshold,
       retired_at
FROM ({LATEST_STATS}) WHERE retired_seq IS NOT NULL;

CREATE OR REPLACE VIEW verdicts AS
SELECT * FROM (
    SELECT attempt_id, prompt_id, domain, verifier_version, settings_digest, status, reward, correct, rule,
           'original' AS origin, created_at AS scored_at FROM attempts
    UNION ALL
    SELECT attempt_id, prompt_id, domain, verifier_version, settings_digest, status, reward, correct, rule,
           'rescore' AS origin, rescored_at AS scored_at FROM rescores)
QUALIFY row_number() OVER (PARTITION BY attempt_id, verifier_version, settings_digest
                           ORDER BY origin = 'original' DESC) = 1;

CREATE OR REPLACE VIEW version_pass_rates AS
SELECT verifier_version, settings_digest, domain, prompt_id, count(*) AS verdicts,
       count(*) FILTER (WHERE status <> 'error') AS scored, count(*) FILTER (WHERE correct) AS correct,
       count(*) FILTER (WHERE correct) / nullif(count(*) FILTER (WHERE status <> 'error'), 0) AS pass_rate
FROM verdicts GROUP BY ALL;

CREATE OR REPLACE VIEW retired AS
SELECT prompt_id, domain, seq, step, epoch, pass_rate, window_samples, threshold, retired_at
FROM retirements ORDER BY seq;
"""


class LedgerSchemaError(LedgerError):
    """The file's schema version is not one this code can open (newer, or unreadable)."""


def _migrate_1_to_2(con: duckdb.DuckDBPyConnection) -> None:
    # Pass-rate history already in a v1 file is kept; retirements start empty and are decided from the
    # next recorded batch on (the ledger re-evaluates every prompt once right after a migration).
    con.execute(V2_DDL)


def _migrate_2_to_3(con: duckdb.DuckDBPyConnection) -> None:
    # Version 0: every row the owner writes later has a larger version and supersedes these.
    con.execute(V3_DDL)
    con.execute(f"INSERT INTO prompt_stats SELECT prompt_id, 0 AS version, * EXCLUDE (prompt_id) "
                f"FROM ({STATS_FROM_ATTEMPTS})")


def _migrate_3_to_4(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(V4_DDL)
    con.execute(V4_MOVE_RETIREMENTS)


def _migrate_4_to_5(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(V5_DDL)  # rows recorded before it have no rule: NULL, which `count(rule)` skips


def _migrate_5_to_6(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(V6_DDL)  # empty: a ledger serves no curriculum set until one is registered


def _migrate_6_to_7(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(V7_DDL)  # attempts recorded before it carried no key: nothing to fill


def _migrate_7_to_8(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(V8_DDL)  # older attempts are numbered; their version, digest and completion stay NULL


MIGRATIONS: dict[int, Callable[[duckdb.DuckDBPyConnection], None]] = {
    1: _migrate_1_to_2, 2: _migrate_2_to_3, 3: _migrate_3_to_4, 4: _migrate_4_to_5, 5: _migrate_5_to_6,
    6: _migrate_6_to_7, 7: _migrate_7_to_8}


def read_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The stored schema version, or None for an empty database."""
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if "ledger_meta" not in tables:
        if tables:
            raise LedgerSchemaError(f"not a scalerl ledger (tables {sorted(tables)} but no ledger_meta)")
        return None
    row = con.execute("SELECT value FROM ledger_meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        raise LedgerSchemaError("ledger_meta has no schema_version")
    return int(row[0])


def create_or_migrate(con: duckdb.DuckDBPyConnection, path: str) -> int:
    """Bring the database to SCHEMA_VERSION; returns the version found (0 for a new file)."""
    found = read_version(con)
    if found is not None and found > SCHEMA_VERSION:
        raise LedgerSchemaError(
            f"ledger {path} has schema version {found}; this scalerl understands versions up to "
            f"{SCHEMA_VERSION}. Open it with a newer scalerl (the file was not modified)."
        )
    if found == SCHEMA_VERSION:
        con.execute(VIEWS_DDL)  # views are code: refresh them to this version's definition
        return found
    con.execute("BEGIN TRANSACTION")
    try:
        if found is None:  # a new file is a version-1 file migrated: one path to every version's schema
            con.execute(V1_DDL)
        for version in range(found or 1, SCHEMA_VERSION):
            MIGRATIONS[version](con)
        con.execute(VIEWS_DDL)
        con.execute(
            "INSERT OR REPLACE INTO ledger_meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)]
        )
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return found or 0


def check_readable(con: duckdb.DuckDBPyConnection, path: str) -> int:
    """For read-only opens: the version must be exactly current (a read-only open cannot migrate)."""
    found = read_version(con)
    if found is None:
        raise LedgerSchemaError(f"{path} is an empty database, not a scalerl ledger")
    if found != SCHEMA_VERSION:
        newer = found > SCHEMA_VERSION
        hint = "open it with a newer scalerl" if newer else "open it once read-write to migrate it"
        raise LedgerSchemaError(
            f"ledger {path} has schema version {found}, this scalerl reads version {SCHEMA_VERSION}; {hint}"
        )
    return found
