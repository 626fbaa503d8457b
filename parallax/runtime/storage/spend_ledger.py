"""Each tenant's spend per UTC day in the deployment's PostgreSQL (daily budgets), each run once.

See docs/deploy.md#tenant-daily-budgets and docs/internals/postgres.md#the-daily-budget-ledger.
"""

from __future__ import annotations

from typing import Any

from parallax.state.records import Limits

BUDGETED_GRAPHS = ("solve", "plan", "chat", "learn", "loop")
"""The graphs whose input takes a run budget (`max_cost`, `max_tokens`): every graph that calls a
model. A tenant's daily budget caps each new run of them at what is left today."""
CHARGE_LOCK_CLASS = (
    0x7061_7263  # "parc": the per-thread charge lock (the second key: hashtext(thread_id))
)

DDL = f"""
CREATE TABLE IF NOT EXISTS parallax_run_charges (
    run_id text PRIMARY KEY,
    tenant text NOT NULL,
    day date NOT NULL,
    tokens bigint NOT NULL,
    cost_usd numeric(20, 10),
    charged_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS parallax_run_charges_day ON parallax_run_charges (tenant, day);

CREATE TABLE IF NOT EXISTS parallax_tenant_spend (
    tenant text NOT NULL,
    day date NOT NULL,
    tokens bigint NOT NULL DEFAULT 0,
    cost_usd numeric(20, 10) NOT NULL DEFAULT 0,
    runs integer NOT NULL DEFAULT 0,
    unpriced_runs integer NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, day)
);
-- a run stopped by a cap at least what the day has left: the day cannot pay for its requests
-- (until the reset)
ALTER TABLE parallax_tenant_spend
    ADD COLUMN IF NOT EXISTS exhausted boolean NOT NULL DEFAULT false;

CREATE TABLE IF NOT EXISTS parallax_tenant_budgets (
    tenant text PRIMARY KEY,
    max_cost numeric(20, 10),
    max_tokens bigint
);

CREATE OR REPLACE FUNCTION parallax_utc_day() RETURNS date LANGUAGE sql STABLE AS $$
    SELECT (now() AT TIME ZONE 'UTC')::date
$$;

-- charge a run once (its id is the key); true when this call charged it
CREATE OR REPLACE FUNCTION parallax_charge(
    run text, who text, spent_tokens bigint, spent_cost numeric
) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    today date := parallax_utc_day();
BEGIN
    INSERT INTO parallax_run_charges (run_id, tenant, day, tokens, cost_usd)
    VALUES (run, who, today, greatest(0, spent_tokens),
            CASE WHEN spent_cost IS NOT NULL THEN greatest(0, spent_cost) END)
    ON CONFLICT (run_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO parallax_tenant_spend AS s (tenant, day, tokens, cost_usd, runs, unpriced_runs)
    VALUES (who, today, greatest(0, spent_tokens), coalesce(greatest(0, spent_cost), 0), 1,
            CASE WHEN spent_cost IS NULL AND spent_tokens > 0 THEN 1 ELSE 0 END)
    ON CONFLICT (tenant, day) DO UPDATE SET tokens = s.tokens + EXCLUDED.tokens,
        cost_usd = s.cost_usd + EXCLUDED.cost_usd,
        runs = s.runs + 1, unpriced_runs = s.unpriced_runs + EXCLUDED.unpriced_runs;
    RETURN true;
END $$;

-- the runs whose work a run carries on: walking back its thread while the run has no input of its
-- own (a resume) and the run before it, of the same graph, stopped unsettled: `interrupted` (an
-- interrupt for a person), or `success` without a `spend` (Aegra ends a run stopped by
-- `interrupt_before` / `interrupt_after` `success`)
CREATE OR REPLACE FUNCTION parallax_resumed_runs(run text) RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    cur runs;
    prev runs;
    carried text[] := ARRAY[]::text[];
BEGIN
    SELECT * INTO cur FROM runs WHERE run_id = run;
    WHILE FOUND
            AND (cur.input IS NULL OR jsonb_typeof(cur.input) = 'null' OR cur.input = '{{}}'::jsonb)
    LOOP
        SELECT * INTO prev FROM runs o WHERE o.thread_id = cur.thread_id
            AND (o.created_at, o.run_id) < (cur.created_at, cur.run_id)
            ORDER BY o.created_at DESC, o.run_id DESC LIMIT 1;
        EXIT WHEN NOT FOUND
            OR prev.execution_params ->> 'graph_id'
                IS DISTINCT FROM cur.execution_params ->> 'graph_id'
            OR NOT (prev.status = 'interrupted'
                    OR (prev.status = 'success'
                        AND jsonb_typeof(prev.output -> 'spend') IS DISTINCT FROM 'object'));
        carried := carried || prev.run_id;
        cur := prev;
    END LOOP;
    RETURN carried;
END $$;

-- a run of `who` that its budget stopped (a request that did not fit was not sent) with a cap
-- (`given`: its stored input) at least what the day has left now shows the day cannot pay for such
-- a request: the day counts as reached until the reset (each request is held at its worst case, so
-- a day is seldom spent to the last token)
CREATE OR REPLACE FUNCTION parallax_mark_exhausted(who text, given jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    b parallax_tenant_budgets := parallax_budget_of(who);
    s parallax_tenant_spend;
BEGIN
    IF b.tenant IS NULL OR jsonb_typeof(given) IS DISTINCT FROM 'object' THEN
        RETURN;
    END IF;
    INSERT INTO parallax_tenant_spend (tenant, day) VALUES (who, parallax_utc_day())
    ON CONFLICT DO NOTHING;
    SELECT * INTO s FROM parallax_tenant_spend WHERE tenant = who AND day = parallax_utc_day();
    IF (b.max_tokens IS NOT NULL AND jsonb_typeof(given -> 'max_tokens') = 'number'
            AND (given ->> 'max_tokens')::numeric >= b.max_tokens - s.tokens)
       OR (b.max_cost IS NOT NULL AND jsonb_typeof(given -> 'max_cost') = 'number'
            AND (given ->> 'max_cost')::numeric >= round(b.max_cost - s.cost_usd, 8)) THEN
        UPDATE parallax_tenant_spend SET exhausted = true
        WHERE tenant = who AND day = parallax_utc_day();
    END IF;
END $$;

CREATE OR REPLACE FUNCTION parallax_charge_run() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    spent jsonb := CASE WHEN jsonb_typeof(NEW.output) = 'object' THEN NEW.output -> 'spend' END;
    spent_tokens bigint;
    spent_cost numeric;
    earlier_tokens bigint;
    earlier_cost numeric;
BEGIN
    IF jsonb_typeof(spent) = 'object' THEN
        PERFORM pg_advisory_xact_lock({CHARGE_LOCK_CLASS}, hashtext(NEW.thread_id));
        spent_tokens := CASE WHEN jsonb_typeof(spent -> 'tokens') = 'number'
                             THEN floor((spent ->> 'tokens')::numeric)::bigint ELSE 0 END;
        spent_cost := CASE WHEN jsonb_typeof(spent -> 'cost_usd') = 'number'
                           THEN (spent ->> 'cost_usd')::numeric END;
        SELECT coalesce(sum(c.tokens), 0), coalesce(sum(c.cost_usd), 0)
        INTO earlier_tokens, earlier_cost
        FROM parallax_run_charges c WHERE c.run_id = ANY(parallax_resumed_runs(NEW.run_id));
        PERFORM parallax_charge(NEW.run_id, NEW.user_id, spent_tokens - earlier_tokens,
                                spent_cost - earlier_cost);
    END IF;
    IF jsonb_typeof(NEW.output) = 'object'
            AND (coalesce(NEW.output ->> 'reason', '') LIKE 'budget reached%'
            OR coalesce(NEW.output ->> 'budget_stop', '') LIKE 'budget reached%'
            OR coalesce(NEW.output -> 'last_run' ->> 'reason', '') LIKE 'budget reached%') THEN
        PERFORM parallax_mark_exhausted(NEW.user_id, NEW.input);
    END IF;
    RETURN NULL;
END $$;

-- charge a run that has ended (not pending or running) what its replica saw it spend
-- (server/run_charges.py), 0 when a run that resumes it was charged its `spend` already; true when
-- this call charged it
CREATE OR REPLACE FUNCTION parallax_charge_ended(run text, seen_tokens bigint, seen_cost numeric)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    r runs;
BEGIN
    SELECT * INTO r FROM runs WHERE run_id = run AND status NOT IN ('pending', 'running');
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM pg_advisory_xact_lock({CHARGE_LOCK_CLASS}, hashtext(r.thread_id));
    IF EXISTS (
            SELECT 1 FROM runs later JOIN parallax_run_charges c ON c.run_id = later.run_id
            WHERE later.thread_id = r.thread_id AND later.status = 'success'
              AND jsonb_typeof(later.output -> 'spend') = 'object'
              AND (later.created_at, later.run_id) > (r.created_at, r.run_id)
              AND r.run_id = ANY(parallax_resumed_runs(later.run_id))) THEN
        seen_tokens := 0;
        seen_cost := 0;
    END IF;
    RETURN parallax_charge(r.run_id, r.user_id, seen_tokens, seen_cost);
END $$;

DROP TRIGGER IF EXISTS parallax_charge_run ON runs;
CREATE TRIGGER parallax_charge_run AFTER UPDATE OF status ON runs FOR EACH ROW
    WHEN (NEW.status = 'success' AND OLD.status IS DISTINCT FROM 'success')
    EXECUTE FUNCTION parallax_charge_run();

-- the tenant's budget (its own row, else '*'), or none
CREATE OR REPLACE FUNCTION parallax_budget_of(who text) RETURNS parallax_tenant_budgets
LANGUAGE sql STABLE AS $$
    SELECT b FROM parallax_tenant_budgets b WHERE b.tenant IN (who, '*')
    ORDER BY b.tenant = '*' LIMIT 1
$$;

-- why a new run of the tenant is refused today (logic/daily_budget.py `reached`), or NULL
CREATE OR REPLACE FUNCTION parallax_budget_refusal(who text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    b parallax_tenant_budgets := parallax_budget_of(who);
    s parallax_tenant_spend;
BEGIN
    IF b.tenant IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT * INTO s FROM parallax_tenant_spend WHERE tenant = who AND day = parallax_utc_day();
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF s.exhausted THEN
        RETURN format(
            'daily budget reached: a run could not pay for its next request with what was left '
            'today ($%s and %s tokens spent; budget: %s); resets at %s',
            s.cost_usd::float8, s.tokens,
            concat_ws(', ', '$' || b.max_cost::float8, b.max_tokens || ' tokens'),
            to_char(parallax_utc_day() + 1, 'YYYY-MM-DD"T00:00:00Z"'));
    END IF;
    IF b.max_cost IS NOT NULL AND s.unpriced_runs > 0 THEN
        RETURN format('daily budget reached: %s run(s) today used a model without a price, '
                      'so the daily max_cost $%s cannot be held; resets at %s',
                      s.unpriced_runs, b.max_cost::float8,
                      to_char(parallax_utc_day() + 1, 'YYYY-MM-DD"T00:00:00Z"'));
    END IF;
    IF (b.max_cost IS NOT NULL AND round(b.max_cost - s.cost_usd, 8) <= 0)
            OR (b.max_tokens IS NOT NULL AND s.tokens >= b.max_tokens) THEN
        RETURN format(
            'daily budget reached: spent $%s and %s tokens today (budget: %s); resets at %s',
            s.cost_usd::float8, s.tokens,
            concat_ws(', ', '$' || b.max_cost::float8, b.max_tokens || ' tokens'),
            to_char(parallax_utc_day() + 1, 'YYYY-MM-DD"T00:00:00Z"'));
    END IF;
    RETURN NULL;
END $$;

-- a budgeted graph's input with max_cost / max_tokens at most what the tenant has left today
-- (logic/daily_budget.py `capped`); other inputs as they are
CREATE OR REPLACE FUNCTION parallax_budget_capped(who text, graph text, given jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    b parallax_tenant_budgets := parallax_budget_of(who);
    s parallax_tenant_spend;
    out jsonb := given;
    left_cost numeric;
    left_tokens bigint;
BEGIN
    IF b.tenant IS NULL OR graph NOT IN ({", ".join(f"'{name}'" for name in BUDGETED_GRAPHS)})
            OR jsonb_typeof(given) IS DISTINCT FROM 'object' THEN
        RETURN given;
    END IF;
    SELECT * INTO s FROM parallax_tenant_spend WHERE tenant = who AND day = parallax_utc_day();
    IF b.max_cost IS NOT NULL THEN
        left_cost := round(b.max_cost - coalesce(s.cost_usd, 0), 8);
        IF jsonb_typeof(out -> 'max_cost') IS DISTINCT FROM 'number'
                OR (out ->> 'max_cost')::numeric > left_cost THEN
            out := out || jsonb_build_object('max_cost', left_cost::float8);
        END IF;
    END IF;
    IF b.max_tokens IS NOT NULL THEN
        left_tokens := b.max_tokens - coalesce(s.tokens, 0);
        IF jsonb_typeof(out -> 'max_tokens') IS DISTINCT FROM 'number'
                OR (out ->> 'max_tokens')::numeric > left_tokens THEN
            out := out || jsonb_build_object('max_tokens', left_tokens);
        END IF;
    END IF;
    RETURN out;
END $$;
"""  # nosec B608 # constants only; values are bound


def migrate(conn: Any) -> None:
    """Create or update the tables, functions and the charge trigger (idempotent). Needs Aegra's
    `runs` table."""
    conn.execute(DDL)


def write_budgets(conn: Any, budgets: dict[str, Limits]) -> None:
    """Make `parallax_tenant_budgets` the budgets of this configuration (every replica writes the
    same at start: PARALLAX_DAILY_BUDGETS must be the same on all of them). For the cron-run
    trigger; the HTTP routes read the settings themselves."""
    conn.execute("DELETE FROM parallax_tenant_budgets")
    for tenant, budget in budgets.items():
        conn.execute(
            "INSERT INTO parallax_tenant_budgets (tenant, max_cost, max_tokens) VALUES (%s,"
            " %s, %s)",
            (tenant, budget.get("max_cost"), budget.get("max_tokens")),
        )


CHARGE_ENDED_SQL = "SELECT parallax_charge_ended(%(run_id)s, %(tokens)s::bigint, %(cost)s::numeric)"
"""Charge a run that has ended with what its replica saw it spend (server/run_charges.py); nothing
when it was charged already (a solve or plan run's own `spend`, by the trigger) or has not ended."""
SPENT_TODAY_SQL = (
    "SELECT tokens, cost_usd::float8, runs, unpriced_runs, exhausted FROM parallax_tenant_spend "
    "WHERE tenant = %s AND day = parallax_utc_day()"
)
SPEND_TODAY_SQL = (
    "SELECT tenant, tokens, cost_usd::float8 FROM parallax_tenant_spend WHERE day ="
    " parallax_utc_day()"
)
