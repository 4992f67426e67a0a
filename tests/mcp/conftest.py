"""MCP fixtures: the test app on the parametrized driver, spoken to in both protocol eras."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from engine import JobRegistry, Jobs
from engine.backfill import BackfillRegistry
from mcp_jobs.config import Settings
from tests.backfill.support import Customers
from tests.mcp.support import HEALED, Caller, declare_app, serve

# "legacy" speaks the 2025-11-25 initialize handshake; "auto" negotiates 2026-07-28.
MODES = ("legacy", "auto")


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    mode: str = request.param
    return mode


@pytest.fixture
def app(registry: JobRegistry) -> Iterator[JobRegistry]:
    declare_app(registry)
    HEALED.clear()
    yield registry
    HEALED.clear()


@pytest.fixture
def backfill_registry() -> BackfillRegistry:
    return BackfillRegistry()


@pytest.fixture
def customers(tmp_path: Path) -> Iterator[Customers]:
    table = Customers(tmp_path / "app.db", rows=30, clean_every=6)
    try:
        yield table
    finally:
        table.close()


OpenMcp = Callable[..., AbstractAsyncContextManager[Caller]]


@pytest.fixture
def open_mcp(
    jobs: Jobs, app: JobRegistry, mode: str, backfill_registry: BackfillRegistry
) -> OpenMcp:
    """`async with open_mcp() as mcp:` — a client session on the test app. (Not a fixture that
    holds the session open: its task group must be entered and left by the test's own task.)"""

    def open_(settings: Settings | None = None) -> AbstractAsyncContextManager[Caller]:
        return serve(jobs, mode, settings, backfill_registry)

    return open_
