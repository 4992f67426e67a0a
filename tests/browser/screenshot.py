"""The README's picture of the dashboard: `python -m tests.browser.screenshot docs/dashboard.png`.

Seeds a SQLite database with every state (tests.browser.seeding), starts the real
`mcp-jobs dashboard` on it, and for a few of its sampler periods enqueues and runs mail jobs so
the sparklines have a shape; then saves the overview. Needs the system Chromium and Playwright,
as the browser tests do. Waits are bounded by the sampler's period.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from functools import partial
from pathlib import Path

from engine import JobRegistry, Worker, connect
from engine.backfill import BackfillRegistry
from mcp_jobs.dashboard.sampler import DEFAULT_INTERVAL_MS
from tests.browser.app_jobs import declare
from tests.browser.seeding import seed
from tests.browser.support import CHROMIUM_ARGS, LAUNCH_MS, chromium_path, run_async
from tests.support.dashboard_process import run_dashboard

# Jobs enqueued before each sample; every other sample a worker drains the queue first.
WAVES = (8, 14, 6, 18, 10, 4)


async def _wave(url: str, n: int, offset: int, drain: bool) -> None:
    registry = JobRegistry()
    declare(registry, BackfillRegistry())
    jobs = await connect(url, registry=registry)
    try:
        if drain:
            await Worker(jobs, queues=["mail"], prune=False).run_until_idle()
        for i in range(n):
            await jobs.enqueue("greet", {"user_id": 10_000 + offset + i})
    finally:
        await jobs.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where to write the PNG")
    args = parser.parse_args(argv)
    executable = chromium_path()
    if executable is None:
        print("chromium not found: apt-get install chromium", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="mcp-jobs-shot-") as tmp:
        url = f"sqlite:///{tmp}/jobs.db"
        run_async(lambda: seed(url))
        with run_dashboard(url, read_only=True) as dashboard, sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=executable, args=CHROMIUM_ARGS, timeout=LAUNCH_MS
            )
            page = browser.new_page(viewport={"width": 1280, "height": 820})
            page.goto(dashboard.base)
            for i, n in enumerate(WAVES):
                run_async(partial(_wave, url, n, i * 100, drain=i % 2 == 1))
                # The sampler's next reading: the page reloads itself and shows one more point.
                page.wait_for_selector(
                    f'[data-testid="spark:mail:depth"][data-points="{i + 2}"]',
                    timeout=3 * DEFAULT_INTERVAL_MS,
                )
            page.screenshot(path=str(args.out))
            browser.close()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
