-- Version 9: pauses (see schema.sql).

-- One row per paused queue or job name (engine/pauses.py): the claim skips waiting jobs whose
-- queue or name has a row here, probing the primary key, until the row is deleted.
CREATE TABLE {schema}.pauses (
    kind text COLLATE "C" NOT NULL CHECK (kind IN ('queue', 'job')),
    name text COLLATE "C" NOT NULL,
    paused_by text,
    paused_at bigint NOT NULL,
    reason text,
    PRIMARY KEY (kind, name)
);
