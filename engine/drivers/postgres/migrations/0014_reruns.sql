-- Version 14: reruns (see schema.sql).

-- A rerun from a step (engine/reruns.py) moves the job to a new run; `rerun_of` names the run it
-- came from. Nullable without a default: adding it rewrites nothing.
ALTER TABLE {schema}.jobs ADD COLUMN rerun_of text COLLATE "C";

-- One row per rerun, so the steps of every earlier run of a job can be found (inspect by run
-- id) and go with the job when retention deletes it (prune_jobs), without an index on steps.
CREATE TABLE {schema}.reruns (
    run_id text COLLATE "C" PRIMARY KEY,
    job_id text NOT NULL,
    previous_run_id text COLLATE "C" NOT NULL,
    from_step text NOT NULL,
    at bigint NOT NULL
);
CREATE INDEX reruns_job_idx ON {schema}.reruns (job_id);
