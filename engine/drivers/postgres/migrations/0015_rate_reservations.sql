-- Version 15: rate_reservations (see schema.sql).

-- A job shed over its rate keeps the start its take reserved (engine/rate_limits.py): claimed
-- again from slot_at to late_at (epoch ms) it starts without taking again. Rows are deleted
-- when used, or by the next take once past late_at.
CREATE TABLE {schema}.rate_reservations (
    job_id text COLLATE "C" PRIMARY KEY,
    slot_at bigint NOT NULL,
    late_at bigint NOT NULL,
    blocked_key text COLLATE "C" NOT NULL,
    keys text COLLATE "C" NOT NULL,
    reserved_at bigint NOT NULL
);
CREATE INDEX rate_reservations_late_idx ON {schema}.rate_reservations (late_at);
CREATE INDEX rate_reservations_keys_idx ON {schema}.rate_reservations (keys, slot_at);
