"""Parallax's tables and triggers beside Aegra's, in the deployment's PostgreSQL (`parallax serve` migrates them).

Why triggers on Aegra's `runs` table rather than a patched Aegra: the two promises below must hold
whichever code path changes a run (Aegra's workers on any replica, its lease reaper, its cancel
endpoint, its timeout handling), and every one of them ends in an UPDATE of `runs.status`. A
trigger sees them all, in their own transaction, and needs no change to Aegra's Python; what it
depends on is four columns of one table (status, thread_id, created_at, execution_params), which
the pinned Aegra's migrations define (docs/deploy.md says what to re-check on an Aegra upgrade).

1. One run at a time per thread, in order (double-texting's `enqueue`, and the ground the other
   strategies stand on): `parallax_claim_in_order` refuses the claim of a pending run (the UPDATE
   pending -> running Aegra's worker makes) while another run of its thread is running or an older
   one is still pending: the row is left as it was, Aegra's worker sees that it did not get the
   run and drops it, and the run stays pending until the thread is free
   (server/platform.py's dispatcher hands it to a worker again). A per-thread advisory lock,
   taken in the claiming transaction, makes two replicas' claims of the same thread take turns.
2. Webhooks, kept until delivered: `parallax_run_ended` turns the run's armed outbox row
   (`parallax_webhooks`, linked through the run metadata key `parallax_webhook`) into a due
   one, with the run as it ended as payload, in the very transaction that makes the run terminal.
"""

from __future__ import annotations

from typing import Any

CLAIM_LOCK_CLASS = 0x7061_7278  # "parx": the first key of the per-thread claim lock (the second: hashtext(thread_id))

DDL = f"""
CREATE TABLE IF NOT EXISTS parallax_webhooks (
    id text PRIMARY KEY,
    tenant text NOT NULL,
    url text NOT NULL,
    status text NOT NULL DEFAULT 'armed',
    run_id text,
    thread_id text,
    payload jsonb,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    lease_until timestamptz,
    claimed_by text,
    last_status integer,
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    ended_at timestamptz,
    delivered_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS parallax_webhooks_due ON parallax_webhooks (next_attempt_at) WHERE status = 'due';
CREATE INDEX IF NOT EXISTS parallax_webhooks_updated ON parallax_webhooks (updated_at);

CREATE OR REPLACE FUNCTION parallax_claim_in_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock({CLAIM_LOCK_CLASS}, hashtext(NEW.thread_id));
    IF EXISTS (SELECT 1 FROM runs o
               WHERE o.thread_id = NEW.thread_id AND o.run_id <> NEW.run_id
                 AND (o.status = 'running'
                      OR (o.status = 'pending' AND (o.created_at, o.run_id) < (NEW.created_at, NEW.run_id)))) THEN
        RETURN NULL;  -- not now: the run stays pending, unclaimed
    END IF;
    RETURN NEW;
END $$;

DROP TRIGGER IF EXISTS parallax_claim_in_order ON runs;
CREATE TRIGGER parallax_claim_in_order BEFORE UPDATE OF status ON runs FOR EACH ROW
    WHEN (OLD.status = 'pending' AND NEW.status = 'running') EXECUTE FUNCTION parallax_claim_in_order();

CREATE OR REPLACE FUNCTION parallax_run_ended() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    hook text := NEW.execution_params -> 'run_metadata' ->> 'parallax_webhook';
BEGIN
    IF hook IS NOT NULL THEN
        UPDATE parallax_webhooks
        SET status = 'due', run_id = NEW.run_id, thread_id = NEW.thread_id, ended_at = now(),
            next_attempt_at = now(), updated_at = now(),
            payload = jsonb_build_object(
                'run_id', NEW.run_id, 'thread_id', NEW.thread_id, 'assistant_id', NEW.assistant_id,
                'status', NEW.status, 'error', NEW.error_message, 'created_at', NEW.created_at,
                'updated_at', NEW.updated_at, 'metadata', NEW.execution_params -> 'run_metadata',
                'multitask_strategy', NEW.execution_params -> 'behavior' -> 'multitask_strategy',
                'values', NEW.output)
        WHERE id = hook AND tenant = NEW.user_id AND status = 'armed';
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS parallax_run_ended ON runs;
CREATE TRIGGER parallax_run_ended AFTER UPDATE OF status ON runs FOR EACH ROW
    WHEN (OLD.status IN ('pending', 'running') AND NEW.status NOT IN ('pending', 'running'))
    EXECUTE FUNCTION parallax_run_ended();
"""


def migrate(conn: Any) -> None:
    """Create or update the tables, functions and triggers (idempotent) on a psycopg connection, in one transaction.
    Needs Aegra's `runs` table: run after Aegra's migrations, under the "migrate" lock."""
    with conn.transaction():
        conn.execute(DDL)
