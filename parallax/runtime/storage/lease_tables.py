"""The lease fence's tables and triggers in the deployment's PostgreSQL.

Here, below both entry points: `parallax serve` creates them, the server's guard reads them.
See docs/internals/postgres.md#the-lease-fences-tables.
"""

from __future__ import annotations

from typing import Any

MIGRATION = """
CREATE TABLE IF NOT EXISTS parallax_run_leases (
    run_id text PRIMARY KEY,
    generation bigint NOT NULL,
    claimed_by text,
    claimed_at timestamptz NOT NULL DEFAULT now()
);
CREATE OR REPLACE FUNCTION parallax_bump_lease() RETURNS trigger AS $$
BEGIN
    INSERT INTO parallax_run_leases (run_id, generation, claimed_by, claimed_at)
    VALUES (NEW.run_id, 1, NEW.claimed_by, now())
    ON CONFLICT (run_id) DO UPDATE
        SET generation = parallax_run_leases.generation + 1, claimed_by = EXCLUDED.claimed_by,
            claimed_at = now();
    RETURN NEW;
END $$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS parallax_lease_generation ON runs;
CREATE TRIGGER parallax_lease_generation AFTER UPDATE OF claimed_by ON runs FOR EACH ROW
    WHEN (NEW.claimed_by IS NOT NULL AND NEW.claimed_by IS DISTINCT FROM OLD.claimed_by)
    EXECUTE FUNCTION parallax_bump_lease();

CREATE TABLE IF NOT EXISTS parallax_fenced_writes (
    id bigserial PRIMARY KEY,
    run_id text NOT NULL,
    generation bigint NOT NULL,
    current_generation bigint NOT NULL,
    prefix text NOT NULL,
    key text NOT NULL,
    refused_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS parallax_handovers (
    id bigserial PRIMARY KEY,
    run_id text NOT NULL,
    generation bigint NOT NULL,
    previous_generation bigint NOT NULL,
    prefix text NOT NULL,
    key text NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now()
);
CREATE OR REPLACE FUNCTION parallax_fence_store() RETURNS trigger AS $$
DECLARE
    current bigint;
BEGIN
    SELECT generation INTO current FROM parallax_run_leases
    WHERE run_id = NEW.value->'_lease'->>'run';
    IF current IS NOT NULL AND current <> (NEW.value->'_lease'->>'generation')::bigint THEN
        INSERT INTO parallax_fenced_writes (run_id, generation, current_generation, prefix, key)
        VALUES (NEW.value->'_lease'->>'run', (NEW.value->'_lease'->>'generation')::bigint, current,
                NEW.prefix, NEW.key);
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.value ? '_lease'
            AND (OLD.value->'_lease'->>'generation')
                IS DISTINCT FROM (NEW.value->'_lease'->>'generation') THEN
        INSERT INTO parallax_handovers (run_id, generation, previous_generation, prefix, key)
        VALUES (NEW.value->'_lease'->>'run', (NEW.value->'_lease'->>'generation')::bigint,
                (OLD.value->'_lease'->>'generation')::bigint, NEW.prefix, NEW.key);
    END IF;
    RETURN NEW;
END $$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS parallax_fence_store ON store;
CREATE TRIGGER parallax_fence_store BEFORE INSERT OR UPDATE ON store FOR EACH ROW
    WHEN (NEW.value ? '_lease') EXECUTE FUNCTION parallax_fence_store();
"""
"""Run by `parallax serve` after Aegra's and the store's migrations (it needs the `runs` and `store`
tables). The second trigger is the fence in the database: a store record stamped with a lease token
(runtime/lease_check.py `stamped`: traces, dead letters, playbook records) whose generation is not
the run's current one is not written, and the refusal is kept in `parallax_fenced_writes`; a record
that a later execution of the same run writes again (a takeover after the first had written it) is
kept in `parallax_handovers`, which is how a run that reached its end twice is told from a retried
write."""


def migrate_sync(conn: Any) -> None:
    """Create the generation table, the refused-writes tables and their triggers (idempotent), on a
    psycopg connection."""
    conn.execute(MIGRATION)
