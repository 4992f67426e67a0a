"""The migrated SQLite driver most tests of this package start from."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine import ManualClock
from engine.drivers.sqlite import SqliteDriver
from tests.sqlite.enqueues import START


@pytest.fixture
async def driver(tmp_path: Path) -> AsyncIterator[SqliteDriver]:
    """A driver on `jobs.db` in the test's directory, at START on a clock nobody moves."""
    d = SqliteDriver(str(tmp_path / "jobs.db"), clock=ManualClock(START), poll_ms=50)
    await d.migrate()
    yield d
    await d.close()
