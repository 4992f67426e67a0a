"""Shared fixtures. The conformance kit's plugin (engine.testing.plugin) gives `clock`,
`registry`, `jobs` and `app_transaction`; here `database_url` comes from `driver_kind`, so a
test taking `jobs` runs once per driver (rule: one suite, every backend). A test limited to some
drivers says so with `@pytest.mark.drivers("memory", ...)`."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator

import pytest

# Before the kit is imported, so its asserts explain themselves when they fail here too.
if "engine.testing" not in sys.modules:
    pytest.register_assert_rewrite("engine.testing")

pytest_plugins = ["engine.testing.plugin"]

ALL_DRIVERS = ("memory", "sqlite", "postgres")
PG_DSN_ENV = "MCP_JOBS_TEST_PG_DSN"


@pytest.fixture(scope="session", autouse=True)
def _incidents_kept_apart(tmp_path_factory: pytest.TempPathFactory) -> None:
    """An unexpected failure a test provokes keeps its traceback under pytest's temp directory,
    not in the user's state directory (servers started as subprocesses inherit it)."""
    from mcp_jobs.incidents import INCIDENT_DIR_ENV

    os.environ[INCIDENT_DIR_ENV] = str(tmp_path_factory.mktemp("incidents"))


@pytest.fixture(params=ALL_DRIVERS)
def driver_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    marker = request.node.get_closest_marker("drivers")
    if marker is not None and kind not in marker.args:
        pytest.skip(f"not a {kind} test: {marker.kwargs.get('reason', 'driver-specific')}")
    if kind == "postgres" and not os.environ.get(PG_DSN_ENV):
        pytest.skip(f"{PG_DSN_ENV} is not set (.ci/run sets it)")
    return kind


@pytest.fixture
async def database_url(driver_kind: str, tmp_path: os.PathLike[str]) -> AsyncIterator[str]:
    """A fresh, empty database of the parametrized kind, dropped after the test."""
    if driver_kind == "memory":
        yield "memory://"
    elif driver_kind == "sqlite":
        yield f"sqlite:///{os.fspath(tmp_path)}/jobs.db"
    else:
        from tests.support.postgres import fresh_database

        async with fresh_database() as url:
            yield url
