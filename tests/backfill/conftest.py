"""Fixtures for backfill tests: the app's table, a fresh backfill registry, and the service."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import Jobs
from engine.backfill import BackfillRegistry, Backfills
from tests.backfill.support import Customers


@pytest.fixture
def backfill_registry() -> BackfillRegistry:
    return BackfillRegistry()


@pytest.fixture
def customers(tmp_path: Path) -> Iterator[Customers]:
    """25 dirty rows among 30 (every 6th is already clean), in the app's own SQLite file."""
    table = Customers(tmp_path / "app.db", rows=30, clean_every=6)
    try:
        yield table
    finally:
        table.close()


@pytest.fixture
def backfills(jobs: Jobs, backfill_registry: BackfillRegistry) -> Backfills:
    return Backfills(jobs, registry=backfill_registry, environment="development")
