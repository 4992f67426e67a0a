-- 0006: published job descriptors (engine/descriptors.py).

-- One row per job name, the last one a worker published: what a process without the job's code
-- describes and enqueues it by. The pruner deletes rows nobody published for a long time.
CREATE TABLE IF NOT EXISTS mcp_jobs_descriptors (
    name         TEXT PRIMARY KEY,
    version      TEXT NOT NULL,
    published_by TEXT NOT NULL,
    published_at INTEGER NOT NULL,
    descriptor   TEXT NOT NULL                   -- JSON JobDescriptor
);
