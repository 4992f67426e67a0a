"""Dashboard fixtures: the seeded app on the memory and SQLite drivers."""

from __future__ import annotations

import pytest

from engine import JobRegistry, Jobs
from tests.dashboard.support import Seeded, declare, seed


@pytest.fixture
def app(registry: JobRegistry) -> JobRegistry:
    declare(registry)
    return registry


@pytest.fixture
async def seeded(jobs: Jobs, app: JobRegistry) -> Seeded:
    return await seed(jobs)
