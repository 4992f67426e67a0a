"""A URL the database server answers and refuses (a database, role, password or token it lacks),
checked the same way on every driver: DATABASE_URL_INVALID, not retryable (an agent would retry
DRIVER_UNAVAILABLE, a starting worker wait on it), marked `answered` (so `serve` keeps serving
the refusal), with `mcp-jobs db report` of that URL as its fix."""

from __future__ import annotations

import anyio
import pytest

from engine.driver_errors import DatabaseUrlInvalidError
from engine.drivers.base import Driver, StoreReport
from engine.drivers.urls import report_fix
from engine.errors import JobsError

SECONDS = 30


async def refused_and_reported(driver: Driver) -> tuple[JobsError, StoreReport]:
    """What `driver`'s first migrate raises, and its server report after; the driver closed."""
    try:
        with anyio.fail_after(SECONDS), pytest.raises(JobsError) as raised:
            await driver.migrate()
        with anyio.fail_after(SECONDS):
            report = await driver.server_report()
    finally:
        await driver.close()
    return raised.value, report


def check_answered_refusal(error: JobsError, url: str) -> None:
    assert (error.code, error.retryable) == ("DATABASE_URL_INVALID", False)
    assert isinstance(error, DatabaseUrlInvalidError) and error.answered
    assert error.fix == report_fix(url)
