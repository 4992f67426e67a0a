"""Workload 7: the MCP tools' latency through the in-process client, on a table of n jobs.

The table is filled with `enqueue_many` (not timed); then each tool is called `calls` times
after one warm-up call. The same reads are also timed on the engine directly, so the MCP layer's
own share is visible next to the database's.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks.systems.mcpjobs import QUEUE, REGISTRY, Item, bench_noop
from engine import Enqueue, connect

SAMPLE_IDS = 2_000


def _quantiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def q(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000.0

    return {"p50_ms": q(0.50), "p95_ms": q(0.95), "max_ms": ordered[-1] * 1000.0}


async def _time(calls: int, call: Callable[[], Awaitable[Any]]) -> dict[str, float]:
    await call()  # warm-up: prepared statements, caches
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - started)
    return _quantiles(samples)


async def measure(url: str, n: int, calls: int, fill_batch: int) -> dict[str, Any]:
    from mcp import Client

    from mcp_jobs.config import Settings
    from mcp_jobs.server import build_server

    jobs = await connect(url, registry=REGISTRY, migrate=True)
    rng = random.Random(7)
    sample: list[str] = []
    try:
        started = time.monotonic()
        for lo in range(0, n, fill_batch):
            results = await jobs.enqueue_many(
                [Enqueue(bench_noop, Item(i=i)) for i in range(lo, min(n, lo + fill_batch))]
            )
            sample.extend(r.id for r in rng.sample(results, min(len(results), 20)))
        fill_s = time.monotonic() - started
        sample = rng.sample(sample, min(len(sample), SAMPLE_IDS))

        def pick() -> str:
            return rng.choice(sample)

        async def ok(tool: str, arguments: dict[str, Any]) -> None:
            result = await client.call_tool(tool, arguments)
            if result.is_error:
                raise RuntimeError(f"{tool} failed: {result.structured_content}")

        server = build_server(Settings(database_url=url), jobs)
        async with Client(server) as client:
            tools = {
                "inspect_job": await _time(calls, lambda: ok("inspect_job", {"job_id": pick()})),
                "list_jobs": await _time(calls, lambda: ok("list_jobs", {})),
                "queue_stats": await _time(calls, lambda: ok("queue_stats", {})),
            }
        engine = {
            "trace": await _time(calls, lambda: jobs.trace(pick())),
            "list": await _time(calls, lambda: jobs.list()),
            "stats": await _time(calls, lambda: jobs.stats([QUEUE])),
        }
    finally:
        await jobs.close()
    return {"rows": n, "fill_s": fill_s, "tools": tools, "engine": engine}
