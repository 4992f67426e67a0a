"""`python -m benchmarks.dashboard_pages --dsn …`: each dashboard page's server time with a large
settled history (#26: a page loads in ≤ 200 ms of server time with 1,000,000 settled jobs).

One fresh database: `--settled` finished jobs written straight into the tables
(`benchmarks.history`, finished over the last 30 days, so the newest fall in the stats' recent
window), `--live` ready jobs, and one job with a `--trace-steps` step trace. The dashboard's ASGI
app (`mcp_jobs.dashboard.app.dashboard_app`, read-only, lent the client) answers in process over
`httpx2.ASGITransport`: no socket, no browser, so the time is the server's. Each page is asked
`--warmup` times untimed, then `--rounds` times; the report gives p50, p95 and max per page.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import time
from collections.abc import Sequence
from typing import Any

import httpx2 as httpx
from pydantic import BaseModel

from benchmarks import history
from benchmarks.databases import add_database_arguments, dsn_missing, fresh_database
from engine import Enqueue, JobContext, JobRegistry, Jobs, connect, job
from mcp_jobs.config import Settings
from mcp_jobs.dashboard.routing import dashboard_app

REGISTRY = JobRegistry()
LONG_TRACE_ID = "ffffffffffff0000trace00000000000"
NEXT_PAGE = re.compile(
    r'href="([^"]*)"[^>]*data-testid="next-page"|data-testid="next-page"[^>]*href="([^"]*)"'
)


class Item(BaseModel):
    i: int


def _key(item: Item) -> str:
    return str(item.i)


@job(registry=REGISTRY, name="bench_noop", queue="bench", idempotency_key=_key)
async def bench_noop(input: Item, ctx: JobContext) -> None:
    return None


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _prepare(jobs: Jobs, url: str, settled: int, live: int, trace_steps: int) -> None:
    now = jobs.clock.now_ms()
    await history.seed(url, history.Seed(settled, now, 30 * history.DAY_MS, "d"), analyze=False)
    for lo in range(0, live, 1_000):
        await jobs.enqueue_many(
            [Enqueue(bench_noop, Item(i=i)) for i in range(lo, min(live, lo + 1_000))]
        )
    if trace_steps:
        await history.long_trace(url, LONG_TRACE_ID, trace_steps, now)
    await history.analyze(url)


async def _pages(client: httpx.AsyncClient, jobs: Jobs) -> dict[str, str]:
    """The paths to time: every page, a second page of the list, two filters, two job pages."""
    # From history (queue `other`), not the long trace (queue `bench`, the newest done).
    newest = (await jobs.list(state="done", queue="other", limit=1)).jobs[0].id
    first = await client.get("/jobs")
    found = NEXT_PAGE.search(first.text)
    second = (found.group(1) or found.group(2)).replace("&amp;", "&") if found else "/jobs"
    return {
        "overview": "/",
        "jobs": "/jobs",
        "jobs page 2": second,
        "jobs state=dead": "/jobs?state=dead",
        "jobs queue=other state=failed": "/jobs?queue=other&state=failed",
        "job (settled)": f"/jobs/{newest}",
        "job (long trace)": f"/jobs/{LONG_TRACE_ID}",
        "dead letters": "/dead",
        "backfills": "/backfills",
        "workers": "/workers",
    }


async def run(
    url: str, *, settled: int, live: int, trace_steps: int, warmup: int, rounds: int
) -> dict[str, Any]:
    jobs = await connect(url, registry=REGISTRY, migrate=True)
    try:
        started = time.perf_counter()
        await _prepare(jobs, url, settled, live, trace_steps)
        seeded_s = time.perf_counter() - started
        app = dashboard_app(Settings(database_url=url, read_only=True), jobs=jobs)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            pages = await _pages(client, jobs)
            report: dict[str, Any] = {}
            for label, path in pages.items():
                times: list[float] = []
                for i in range(warmup + rounds):
                    t0 = time.perf_counter()
                    answer = await client.get(path)
                    took = (time.perf_counter() - t0) * 1000
                    if answer.status_code != 200:
                        raise RuntimeError(f"{path} answered {answer.status_code}")
                    if i >= warmup:
                        times.append(took)
                report[label] = {
                    "path": path,
                    "p50_ms": round(statistics.median(times), 2),
                    "p95_ms": round(percentile(times, 0.95), 2),
                    "max_ms": round(max(times), 2),
                    "n": len(times),
                }
    finally:
        await jobs.close()
    return {"settled": settled, "live": live, "seed_seconds": round(seeded_s, 1), "pages": report}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    parser.add_argument("--settled", type=int, default=1_000_000, help="settled jobs in history")
    parser.add_argument("--live", type=int, default=1_000, help="ready jobs waiting")
    parser.add_argument("--trace-steps", type=int, default=1_000, help="steps of the long trace")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if dsn_missing(args):
        return 2

    async def go() -> dict[str, Any]:
        async with fresh_database(args.dsn, args.backend, "dashboard_pages") as url:
            return await run(
                url,
                settled=args.settled,
                live=args.live,
                trace_steps=args.trace_steps,
                warmup=args.warmup,
                rounds=args.rounds,
            )

    report = asyncio.run(go())
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"{args.backend}: {report['settled']:,} settled, {report['live']:,} live "
        f"(seeded in {report['seed_seconds']} s); server time per page, ms"
    )
    print(f"{'page':32} {'p50':>8} {'p95':>8} {'max':>8}  n")
    for label, row in report["pages"].items():
        times = f"{row['p50_ms']:8.2f} {row['p95_ms']:8.2f} {row['max_ms']:8.2f}"
        print(f"{label:32} {times}  {row['n']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
