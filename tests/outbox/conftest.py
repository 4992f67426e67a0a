"""The application-side fixture for outbox tests: see apptx.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engine import Jobs
from tests.outbox.apptx import AppDatabase, app_database


@pytest.fixture
async def app(jobs: Jobs, database_url: str) -> AsyncIterator[AppDatabase]:
    async with app_database(jobs, database_url) as opened:
        yield opened
