-- Version 16: a claim index per queue, and no statistics where no plan hangs on the column
-- (see schema.sql).

-- A worker of named queues walks each queue's waiting rows alone, in rank order (queries.sql
-- claim_queues), the rank spelled apart from jobs_claim_idx's on purpose (claim_queues says
-- why). A build over the waiting rows only, under this migration's lock.
CREATE INDEX jobs_claim_queue_idx
    ON {schema}.jobs (queue, (run_at - 300000 * priority), id)
    WHERE state IN ('ready', 'delayed', 'suspended');

-- ANALYZE runs whenever the table outgrew its statistics (sweep.py). No plan hangs on these
-- columns (a token is only compared beside the id or the running state), and their values
-- (inputs, outputs, errors, tokens) are the costly ones to sample.
ALTER TABLE {schema}.jobs
    ALTER COLUMN input SET STATISTICS 0,
    ALTER COLUMN output SET STATISTICS 0,
    ALTER COLUMN last_error SET STATISTICS 0,
    ALTER COLUMN traceparent SET STATISTICS 0,
    ALTER COLUMN lease_token SET STATISTICS 0,
    ALTER COLUMN settled_token SET STATISTICS 0,
    ALTER COLUMN worker_id SET STATISTICS 0,
    ALTER COLUMN enqueued_by SET STATISTICS 0;
