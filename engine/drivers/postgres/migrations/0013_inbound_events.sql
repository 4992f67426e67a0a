-- Version 13: inbound_events (see schema.sql).

-- Inbound events (migration 13, engine/inbound_events.py): events jobs wait for with
-- ctx.step.wait_for_event, kept until expires_at (the pruner deletes them then), and the waiters
-- index a send reads to wake the suspended jobs waiting on its (name, key, tenant).
CREATE TABLE {schema}.inbound_events (
    id text COLLATE "C" PRIMARY KEY,
    name text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    tenant_id text COLLATE "C",
    payload jsonb,
    sent_at bigint NOT NULL,
    expires_at bigint NOT NULL
);
-- A wait's look: the earliest live event of one (name, key, tenant) after a cursor.
CREATE INDEX inbound_events_match_idx
    ON {schema}.inbound_events (name, key, (coalesce(tenant_id, '')), sent_at, id);
CREATE INDEX inbound_events_expiry_idx ON {schema}.inbound_events (expires_at);
-- One row per job waiting for an event: a send wakes the suspended jobs listed for its
-- (name, key, tenant).
CREATE TABLE {schema}.inbound_event_waiters (
    job_id text COLLATE "C" PRIMARY KEY,
    name text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    tenant_id text COLLATE "C"
);
CREATE INDEX inbound_event_waiters_target_idx
    ON {schema}.inbound_event_waiters (name, key, (coalesce(tenant_id, '')));
