-- 0003: named leadership leases.

-- One row per lease name (the pruner's, say): one holder at a time, until expires_at.
CREATE TABLE IF NOT EXISTS mcp_jobs_leaders (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);
