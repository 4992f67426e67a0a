-- Version 8: published job descriptors (see schema.sql).

-- One row per job name, the last one a worker published (engine/descriptors.py): what a process
-- without the job's code describes and enqueues it by. The pruner deletes rows nobody published
-- for a long time.
CREATE TABLE {schema}.descriptors (
    name text COLLATE "C" PRIMARY KEY,
    version text NOT NULL,
    published_by text NOT NULL,
    published_at bigint NOT NULL,
    descriptor jsonb NOT NULL
);
