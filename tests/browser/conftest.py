"""Browser fixtures: one headless system Chromium per session (skipped, with the reason shown,
where Chromium or Playwright is missing), seeded databases with a live `mcp-jobs dashboard` on
each, and per-test screenshots under $MCP_JOBS_SCREENSHOTS."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.browser.seeding import Seeded, seed
from tests.browser.support import (
    ACTION_MS,
    CHROMIUM_ARGS,
    LAUNCH_MS,
    NAVIGATION_MS,
    chromium_path,
    run_async,
)
from tests.support.dashboard_process import Dashboard, run_dashboard

SCREENSHOTS_ENV = "MCP_JOBS_SCREENSHOTS"
PG_DSN_ENV = "MCP_JOBS_TEST_PG_DSN"
# Playwright must never fetch a browser of its own: the system Chromium is the one under test.
os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")


@pytest.fixture(scope="session")
def screenshots() -> Path:
    where = os.environ.get(SCREENSHOTS_ENV) or tempfile.mkdtemp(prefix="mcp-jobs-screenshots-")
    path = Path(where)
    path.mkdir(parents=True, exist_ok=True)
    return path


# Package scope: sync Playwright holds an event loop of its own while it runs, which the async
# tests of later packages must not find running.
@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    executable = chromium_path()
    if executable is None:
        pytest.skip("chromium not found: apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright not installed: pip install -e '.[dev]'")
    playwright = sync_playwright().start()
    try:
        launched = playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS, timeout=LAUNCH_MS
        )
        try:
            yield launched
        finally:
            launched.close()
    finally:
        playwright.stop()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest, screenshots: Path) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(ACTION_MS)
    context.set_default_navigation_timeout(NAVIGATION_MS)
    opened = context.new_page()
    try:
        yield opened
        failed = getattr(request.node, "rep_call", None)
        if failed is not None and failed.failed:
            opened.screenshot(path=str(screenshots / f"{test_name(request)}-failure.png"))
    finally:
        context.close()


@pytest.fixture
def shoot(page: Any, request: pytest.FixtureRequest, screenshots: Path) -> Any:
    """`shoot("overview")` saves the page as <test name>-overview.png; returns the path."""

    def take(label: str, *, full_page: bool = True) -> Path:
        path = screenshots / f"{test_name(request)}-{label}.png"
        page.screenshot(path=str(path), full_page=full_page)
        return path

    return take


def test_name(request: pytest.FixtureRequest) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name).strip("_")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report


# --- seeded databases ----------------------------------------------------------------------


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    if kind == "postgres" and not os.environ.get(PG_DSN_ENV):
        pytest.skip(f"{PG_DSN_ENV} is not set (.ci/run sets it)")
    return kind


@contextmanager
def _database(kind: str, tmp: Path) -> Iterator[str]:
    """A fresh database of `kind`: a SQLite file, or a PostgreSQL database copied from the
    migrated template (tests.support.postgres) and dropped afterwards."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp}/jobs.db"
        return
    from tests.support.postgres import fresh_database

    # Entered and left on loops of their own: the context holds no connection across its yield.
    made: AbstractAsyncContextManager[str] = fresh_database()
    url = run_async(made.__aenter__)
    try:
        yield url
    finally:
        run_async(lambda: made.__aexit__(None, None, None))


@pytest.fixture(scope="session")
def seeded(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    """The shared, read-only-served database: every state (tests.browser.seeding)."""
    with _database(backend, tmp_path_factory.mktemp(f"seeded-{backend}")) as url:
        yield run_async(partial(seed, url))


@pytest.fixture(scope="session")
def dashboard(seeded: Seeded) -> Iterator[Dashboard]:
    """`mcp-jobs dashboard --read-only` on the shared database."""
    with run_dashboard(seeded.url, read_only=True) as running:
        yield running


@pytest.fixture
def writable(backend: str, tmp_path: Path) -> Iterator[tuple[Seeded, Dashboard]]:
    """A database of its own and a dashboard that may act on it (not read-only)."""
    with _database(backend, tmp_path) as url:
        seeded = run_async(partial(seed, url))
        with run_dashboard(url, read_only=False) as running:
            yield seeded, running
