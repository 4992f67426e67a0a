"""`python -m benchmarks.settled_counts --dsn …`: the time of one sampler interval's exact
settled count (`Jobs.settled_counts`, the dashboard's throughput) over a large settled history.

One fresh database: `--settled` finished jobs written straight into the tables
(`benchmarks.history`) at `--rate` jobs a second, so each `--interval-ms` interval holds
rate × interval rows. On PostgreSQL it prints the query's plan (EXPLAIN ANALYZE, after VACUUM
ANALYZE as autovacuum would run) for the newest full interval, then times `--rounds` counts of
intervals spread over the history, then `--rounds` stats reads (`Jobs.stats`), unfiltered and
of a tenant with no rows: p50 and max, in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import time
from collections.abc import Sequence

import asyncpg

from benchmarks import history
from benchmarks.databases import add_database_arguments, dsn_missing, fresh_database
from engine import connect
from engine.drivers.postgres.settled_counts import COUNT

SQUEEZE = "UPDATE {table} SET finished_at = {now} - ({now} - finished_at) * 1000 / {rate}"


async def _squeeze(url: str, now: int, rate: int) -> None:
    if url.startswith("sqlite"):
        with sqlite3.connect(history.sqlite_path(url)) as db:
            db.execute(SQUEEZE.format(table="mcp_jobs_jobs", now=now, rate=rate))
        return
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(SQUEEZE.format(table="mcp_jobs.jobs", now=now, rate=rate))
    finally:
        await conn.close()


async def run(url: str, settled: int, rate: int, interval_ms: int, rounds: int) -> None:
    jobs = await connect(url)
    try:
        now = jobs.clock.now_ms()
        span_ms = settled * 1000 // rate
        started = time.perf_counter()
        # The history writer spaces rows 1 ms apart at the least: write them so, then squeeze
        # their finish times into the rate's span.
        await history.seed(url, history.Seed(settled, now, settled, "s"), analyze=False)
        await _squeeze(url, now, rate)
        await history.analyze(url)
        print(
            f"seeded {settled:,} settled rows over {span_ms / 1000:.0f} s in "
            f"{time.perf_counter() - started:.1f} s"
        )
        newest = (now - interval_ms, now)
        if url.startswith("postgresql"):
            conn = await asyncpg.connect(url)
            try:
                sql = "EXPLAIN (ANALYZE, BUFFERS) " + COUNT.format(schema="mcp_jobs")
                for row in await conn.fetch(sql, *newest, None):
                    print("  " + row[0])
            finally:
                await conn.close()
        took: list[float] = []
        counted = 0
        for i in range(rounds):
            since = now - span_ms + (span_ms - interval_ms) * i // max(rounds - 1, 1)
            started = time.perf_counter()
            found = await jobs.settled_counts(since, since + interval_ms)
            took.append((time.perf_counter() - started) * 1000)
            counted = sum(c.total for c in (found or {}).values())
        print(
            f"{interval_ms} ms interval, {counted:,} rows in the last one: "
            f"p50 {statistics.median(took):.1f} ms, max {max(took):.1f} ms ({rounds} rounds)"
        )
        # The stats over the same history: its recent window holds about RECENT_SETTLED_CAP rows
        # of a state however many settled within the hour (engine.rules), and so does a
        # tenant's reading, though none of the rows are the tenant's.
        for tenant in (None, "nobody"):
            took.clear()
            for _ in range(rounds):
                started = time.perf_counter()
                stats = await jobs.stats(tenant_id=tenant)
                took.append((time.perf_counter() - started) * 1000)
            done = sum(s.done for s in stats)
            window = f" over the last {stats[0].settled_window_ms / 1000:.1f} s" if stats else ""
            print(
                f"stats{f' of tenant {tenant}' if tenant else ''}: {done:,} done{window}: "
                f"p50 {statistics.median(took):.1f} ms, max {max(took):.1f} ms ({rounds} rounds)"
            )
    finally:
        await jobs.close()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.settled_counts")
    add_database_arguments(parser)
    parser.add_argument("--settled", type=int, default=1_000_000, help="settled rows written")
    parser.add_argument("--rate", type=int, default=7_000, help="jobs settled per second")
    parser.add_argument("--interval-ms", type=int, default=10_000, help="one count's interval")
    parser.add_argument("--rounds", type=int, default=20)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if dsn_missing(args):
        return 2

    async def go() -> None:
        async with fresh_database(args.dsn, args.backend, "settled_counts") as url:
            await run(url, args.settled, args.rate, args.interval_ms, args.rounds)

    asyncio.run(go())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
