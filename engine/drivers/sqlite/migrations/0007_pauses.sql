-- 0007: pauses (engine/pauses.py). A queue or job name listed here is not claimed until its row
-- is deleted; the claim reads this table (a handful of rows) by its primary key.
CREATE TABLE IF NOT EXISTS mcp_jobs_pauses (
    kind      TEXT NOT NULL CHECK (kind IN ('queue', 'job')),
    name      TEXT NOT NULL,
    paused_by TEXT,
    paused_at INTEGER NOT NULL,
    reason    TEXT,
    PRIMARY KEY (kind, name)
);
