"""Worker presence rows: when one has expired, so that a dead worker's row does not stay forever.

A worker upserts its row on every presence beat; a worker that dies (killed, machine gone) never
deletes it. Each beat therefore also deletes a bounded number of OTHER workers' rows that were
not seen for `WORKER_EXPIRY_MS`, on every driver (memory in Python, SQLite and PostgreSQL in
SQL, all with this cutoff). An hour is far beyond any live-worker window (three beats), so an
expired row never belonged to a live worker, and a recently dead one stays visible to diagnosis.
"""

from __future__ import annotations

WORKER_EXPIRY_MS = 3_600_000
# Rows one beat deletes at most: the DELETE stays cheap even after a long backlog of dead rows;
# the beats that follow clear the rest.
EXPIRED_PER_BEAT = 100


def expired_before(now_ms: int) -> int:
    """Rows whose `last_seen_at` is before this are expired at `now_ms`."""
    return now_ms - WORKER_EXPIRY_MS


def is_expired(last_seen_at: int, now_ms: int) -> bool:
    return last_seen_at < expired_before(now_ms)


__all__ = ["EXPIRED_PER_BEAT", "WORKER_EXPIRY_MS", "expired_before", "is_expired"]
