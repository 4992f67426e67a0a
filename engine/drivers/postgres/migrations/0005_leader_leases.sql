-- Version 5: named leadership leases (see schema.sql).

-- One row per lease name (the pruner's, say): one holder at a time, until expires_at.
CREATE TABLE {schema}.leaders (
    name text COLLATE "C" PRIMARY KEY,
    holder text NOT NULL,
    expires_at bigint NOT NULL
);
