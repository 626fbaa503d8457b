"""Parallax's tables and triggers beside Aegra's (`parallax serve` migrates them).

Triggers on Aegra's `runs` table: one run at a time per thread, webhooks due as runs end, crons'
runs. See docs/internals/postgres.md.
"""

from __future__ import annotations

from typing import Any

from parallax.runtime.storage import spend_ledger

# "parx": the first key of the per-thread claim lock (the second: hashtext(thread_id))
CLAIM_LOCK_CLASS = 0x7061_7278
THREAD_LOCK_CLASS = (
    0x7061_7274  # "part": the per-thread double-text lock (the second key: hashtext(thread_id))
)

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
CREATE INDEX IF NOT EXISTS parallax_webhooks_due ON parallax_webhooks (next_attempt_at)
    WHERE status = 'due';
CREATE INDEX IF NOT EXISTS parallax_webhooks_updated ON parallax_webhooks (updated_at);

CREATE OR REPLACE FUNCTION parallax_claim_in_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock({CLAIM_LOCK_CLASS}, hashtext(NEW.thread_id));
    IF EXISTS (SELECT 1 FROM runs o
               WHERE o.thread_id = NEW.thread_id AND o.run_id <> NEW.run_id
                 AND (o.status = 'running'
                      OR (o.status = 'pending'
                          AND (o.created_at, o.run_id) < (NEW.created_at, NEW.run_id)))) THEN
        RETURN NULL;  -- not now: the run stays pending, unclaimed
    END IF;
    RETURN NEW;
END $$;

DROP TRIGGER IF EXISTS parallax_claim_in_order ON runs;
CREATE TRIGGER parallax_claim_in_order BEFORE UPDATE OF status ON runs FOR EACH ROW
    WHEN (OLD.status = 'pending' AND NEW.status = 'running')
    EXECUTE FUNCTION parallax_claim_in_order();

CREATE OR REPLACE FUNCTION parallax_webhook_due(hook text, r runs) RETURNS void LANGUAGE sql AS $$
    UPDATE parallax_webhooks
    SET status = 'due', run_id = r.run_id, thread_id = r.thread_id, ended_at = now(),
        next_attempt_at = now(), updated_at = now(),
        payload = jsonb_build_object(
            'run_id', r.run_id, 'thread_id', r.thread_id, 'assistant_id', r.assistant_id,
            'status', r.status, 'error', r.error_message, 'created_at', r.created_at,
            'updated_at', r.updated_at, 'metadata', r.execution_params -> 'run_metadata',
            'multitask_strategy', r.execution_params -> 'behavior' -> 'multitask_strategy',
            'values', r.output)
    WHERE id = hook AND tenant = r.user_id AND status = 'armed'
$$;

CREATE OR REPLACE FUNCTION parallax_run_ended() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    hook text := NEW.execution_params -> 'run_metadata' ->> 'parallax_webhook';
BEGIN
    IF hook IS NOT NULL THEN
        PERFORM parallax_webhook_due(hook, NEW);
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS parallax_run_ended ON runs;
CREATE TRIGGER parallax_run_ended AFTER UPDATE OF status ON runs FOR EACH ROW
    WHEN (OLD.status IN ('pending', 'running') AND NEW.status NOT IN ('pending', 'running'))
    EXECUTE FUNCTION parallax_run_ended();

CREATE OR REPLACE FUNCTION parallax_cron_run() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    link text := NEW.config -> 'metadata' ->> 'parallax_cron';
    url text;
    hook text;
    busy text;
    refused text;
    capped jsonb;
BEGIN
    SELECT c.payload ->> 'webhook' INTO url FROM crons c
    WHERE c.user_id = NEW.user_id
      AND c.payload -> 'config' -> 'metadata' ->> 'parallax_cron' = link LIMIT 1;
    IF url IS NOT NULL THEN
        hook := gen_random_uuid()::text;
        INSERT INTO parallax_webhooks (id, tenant, url) VALUES (hook, NEW.user_id, url);
        NEW.execution_params := jsonb_set(
            coalesce(NEW.execution_params, '{{}}'::jsonb), '{{run_metadata}}',
            coalesce(NEW.execution_params -> 'run_metadata', '{{}}'::jsonb)
                || jsonb_build_object('parallax_webhook', hook));
    END IF;
    IF NEW.status = 'pending' THEN  -- the tenant's daily budget (runtime/storage/spend_ledger.py)
        refused := parallax_budget_refusal(NEW.user_id);
        IF refused IS NOT NULL THEN
            NEW.status := 'error';
            NEW.error_message := refused;
            IF hook IS NOT NULL THEN
                PERFORM parallax_webhook_due(hook, NEW);
            END IF;
            RETURN NEW;
        END IF;
        capped := parallax_budget_capped(NEW.user_id, NEW.execution_params ->> 'graph_id',
                                         NEW.execution_params -> 'execution' -> 'input_data');
        IF capped IS DISTINCT FROM NEW.execution_params -> 'execution' -> 'input_data' THEN
            NEW.execution_params :=
                jsonb_set(NEW.execution_params, '{{execution,input_data}}', capped);
            NEW.input := capped;
        END IF;
    END IF;
    IF NEW.status = 'pending'
            AND NEW.execution_params -> 'behavior' ->> 'multitask_strategy' = 'reject' THEN
        PERFORM pg_advisory_xact_lock({THREAD_LOCK_CLASS}, hashtext(NEW.thread_id));
        SELECT o.run_id INTO busy FROM runs o
        WHERE o.thread_id = NEW.thread_id AND o.run_id <> NEW.run_id
          AND o.status IN ('pending', 'running')
        ORDER BY o.created_at, o.run_id LIMIT 1;
        IF busy IS NOT NULL THEN
            NEW.status := 'error';
            NEW.error_message := format(
                'thread %s has a run in flight (%s): multitask_strategy ''reject'' '
                'refuses another until it ends', NEW.thread_id, busy);
            IF hook IS NOT NULL THEN
                PERFORM parallax_webhook_due(hook, NEW);
            END IF;
        END IF;
    END IF;
    RETURN NEW;
END $$;

DROP TRIGGER IF EXISTS parallax_cron_run ON runs;
CREATE TRIGGER parallax_cron_run BEFORE INSERT ON runs FOR EACH ROW
    WHEN (NEW.config -> 'metadata' ? 'parallax_cron') EXECUTE FUNCTION parallax_cron_run();

-- crons stored before Parallax linked them (by an older Parallax, or by Aegra alone) get their link
-- here, so their runs' webhooks and "reject" hold from this migration on, not only once each cron
-- is updated
UPDATE crons SET payload = jsonb_set(payload, '{{config}}',
    (CASE WHEN jsonb_typeof(payload -> 'config') = 'object' THEN payload -> 'config'
          ELSE '{{}}'::jsonb END)
    || jsonb_build_object('metadata',
        (CASE WHEN jsonb_typeof(payload -> 'config' -> 'metadata') = 'object'
              THEN payload -> 'config' -> 'metadata'
              ELSE '{{}}'::jsonb END)
        || jsonb_build_object('parallax_cron', gen_random_uuid()::text)))
WHERE jsonb_typeof(payload) = 'object'
  AND NOT coalesce(payload -> 'config' -> 'metadata' ? 'parallax_cron', false);
"""  # nosec B608 # constants only; values are bound


def migrate(conn: Any) -> None:
    """Create or update the tables, functions and triggers (idempotent) on a psycopg connection, in
    one transaction. Needs Aegra's `runs` table: run after Aegra's migrations, under the "migrate"
    lock."""
    with conn.transaction():
        spend_ledger.migrate(conn)  # first: the cron-run trigger calls its functions
        conn.execute(DDL)
