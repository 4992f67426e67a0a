"""Opening a database file that cannot be one: the error a fresh driver's migrate raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import ManualClock
from engine.drivers.sqlite import SqliteDriver
from engine.errors import JobsError


async def migrate_refused(path: Path, clock: ManualClock) -> JobsError:
    """The typed error of migrating a new driver on `path`; the test fails if it succeeds."""
    d = SqliteDriver(str(path), clock=clock)
    try:
        with pytest.raises(JobsError) as raised:
            await d.migrate()
    finally:
        await d.close()
    return raised.value
