"""What the browser tests share: the Chromium they drive, the engine's own answers to compare the
page with, and async code run from the (synchronous) Playwright tests."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from engine import JobRegistry, Jobs, connect
from engine.backfill import BackfillRegistry
from mcp_jobs.config import Settings
from mcp_jobs.operations import Scope
from tests.browser.app_jobs import declare
from tests.support.dashboard_process import APP

T = TypeVar("T")

CHROMIUM_ENV = "MCP_JOBS_CHROMIUM"
# Headless and quiet: no first-run UI, no update or sync traffic, nothing but the page.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LAUNCH_MS = 30_000
ACTION_MS = 10_000
NAVIGATION_MS = 15_000
ASYNC_SECONDS = 60.0


def chromium_path() -> str | None:
    """The system Chromium (Debian's `chromium` package), or MCP_JOBS_CHROMIUM. Never a browser
    Playwright downloads: the tests drive what the machine has or skip."""
    given = os.environ.get(CHROMIUM_ENV)
    if given:
        return given if os.access(given, os.X_OK) else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(
                target=_loop.run_forever, name="browser-tests-loop", daemon=True
            ).start()
        return _loop


def run_async(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine on the tests' own event loop, in a thread beside Playwright's sync API
    (which holds this thread's loop), waiting a bounded time. One loop for the session: a
    database context entered in one call is left in another on the loop that opened it."""

    async def main() -> T:
        return await make()

    return asyncio.run_coroutine_threadsafe(main(), _background_loop()).result(ASYNC_SECONDS)


def settings_for(url: str) -> Settings:
    """What `mcp-jobs dashboard --database-url URL --app tests.browser.seed_app` runs with, so
    the fix lines the engine writes here are the ones the page shows."""
    return Settings(database_url=url, apps=(APP,))


def on_engine(url: str, read: Callable[[Scope], Awaitable[T]]) -> T:
    """`read(scope)` on a fresh client of `url` on the wall clock, as the CLI would run it."""

    async def go() -> T:
        registry, backfills = JobRegistry(), BackfillRegistry()
        declare(registry, backfills)
        jobs: Jobs = await connect(url, registry=registry)
        try:
            scope = Scope(
                jobs=jobs,
                settings=settings_for(url),
                tool="browser-test",
                actor="browser-test",
                backfill_registry=backfills,
                face="cli",
            )
            return await read(scope)
        finally:
            await jobs.close()

    return run_async(go)


def value(locator: Any) -> int:
    """The raw number a dashboard cell carries in `data-value`."""
    raw = locator.get_attribute("data-value", timeout=ACTION_MS)
    assert raw is not None, "no data-value"
    return int(float(raw))


def step_attempts(bars: Any) -> dict[str, tuple[int, str]]:
    """Per step name on a timeline: (attempts shown, status of its last bar). A bar stands for
    the attempts in its `data-attempts` (one when absent), so a bar per step and a bar per
    attempt read the same."""
    shown: dict[str, tuple[int, str]] = {}
    for bar in bars.all():
        name = bar.get_attribute("data-step")
        status = bar.get_attribute("data-status")
        assert name is not None and status is not None, "a step bar without data-step/status"
        attempts = int(bar.get_attribute("data-attempts") or 1)
        before = shown.get(name, (0, status))[0]
        shown[name] = (before + attempts, status)
    return shown
