"""A page waits out the driver's own retries: with the two deadlines equal, a PostgreSQL server
that refuses connections showed "did not answer this page's reads within 10.0 s" and never the
driver's error (connection refused, after N tries), which is what says why."""

from __future__ import annotations

import inspect

from engine.drivers.postgres import PostgresDriver
from mcp_jobs.dashboard.app import READ_DEADLINE_MS


def test_the_page_deadline_outlasts_the_postgres_drivers_retries() -> None:
    retries = inspect.signature(PostgresDriver.__init__).parameters["retry_deadline_ms"].default
    assert retries + 1_000 <= READ_DEADLINE_MS
