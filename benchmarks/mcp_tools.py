"""Workload 7: the MCP tools' latency through the in-process client, at small history and at
large history (#21's acceptance: each call at large within 2× of the same call at small).

The table holds live rows, enqueued with `enqueue_many` (ready, tenants `t0`…`t9`), settled
rows written straight into the tables (`benchmarks.history`: one step each, a fixed mix of
states, names, queues and tenants), and one done job with `trace_steps` steps. Nothing of this
is timed. Then each call is made `calls` times after one warm-up call: the issue's calls
(`HISTORY_CALLS`), and the three of the earlier workload 7 (`inspect_job` of a random live job,
`list_jobs` unfiltered, `queue_stats`), which are also timed on the engine directly so the MCP
layer's own share is visible next to the database's.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks import history
from benchmarks.systems.mcpjobs import QUEUE, REGISTRY, Item, bench_noop
from engine import Enqueue, connect

SAMPLE_IDS = 2_000
HOUR_MS = 3_600_000
# A busy last hour: this share of the settled rows finished in the last half hour (the rest over
# 30 days before it), more than the stats' recent window holds at the large size.
RECENT_SHARE = 20
LONG_TRACE = "inspect_job long trace"
# (label, tool, arguments): every filter of list_jobs, including ones that match nothing (an
# unknown name or queue is refused with the known ones listed: the refusal is what is timed).
HISTORY_CALLS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("queue_stats", "queue_stats", {}),
    ("diagnose_queue", "diagnose_queue", {}),
    ("list_jobs state=dead", "list_jobs", {"state": "dead"}),
    ("list_jobs state=done", "list_jobs", {"state": "done"}),
    ("list_jobs name=bench_noop", "list_jobs", {"name": "bench_noop"}),
    ("list_jobs name=nosuch (JOB_UNKNOWN)", "list_jobs", {"name": "nosuch"}),
    ("list_jobs queue=bench", "list_jobs", {"queue": QUEUE}),
    ("list_jobs tenant_id=t1", "list_jobs", {"tenant_id": "t1"}),
    (
        "list_jobs state=dead queue=nosuch (QUEUE_UNKNOWN)",
        "list_jobs",
        {"state": "dead", "queue": "nosuch"},
    ),
    (LONG_TRACE, "inspect_job", {}),  # the job id is filled in once the job exists
)


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


async def measure(
    url: str,
    live: int,
    settled: int,
    calls: int,
    fill_batch: int,
    trace_steps: int = 0,
) -> dict[str, Any]:
    from mcp import Client

    from mcp_jobs.config import Settings
    from mcp_jobs.server import build_server

    jobs = await connect(url, registry=REGISTRY, migrate=True)
    rng = random.Random(7)
    sample: list[str] = []
    now = jobs.clock.now_ms()
    trace_id = f"{(now - 60_000) << 16:016x}{'f' * 16}"
    try:
        started = time.monotonic()
        recent = settled // RECENT_SHARE
        older = history.Seed(rows=settled - recent, now=now - 2 * HOUR_MS)
        await history.seed(url, older, analyze=False)
        if trace_steps > 0:
            await history.long_trace(url, trace_id, trace_steps, now)
        seed_s = time.monotonic() - started
        started = time.monotonic()
        for lo in range(0, live, fill_batch):
            results = await jobs.enqueue_many(
                [
                    Enqueue(bench_noop, Item(i=i), tenant_id=f"t{i % history.TENANTS}")
                    for i in range(lo, min(live, lo + fill_batch))
                ]
            )
            sample.extend(r.id for r in rng.sample(results, min(len(results), 20)))
        fill_s = time.monotonic() - started
        await history.analyze(url)
        # After the VACUUM, as just-settled rows are: not yet all-visible to an index-only read.
        busy = history.Seed(rows=recent, now=now, span_ms=HOUR_MS // 2, tag="b")
        await history.seed(url, busy, analyze=False)
        sample = rng.sample(sample, min(len(sample), SAMPLE_IDS))

        def pick() -> str:
            return rng.choice(sample)

        async def ok(tool: str, arguments: dict[str, Any], refused: str | None = None) -> None:
            result = await client.call_tool(tool, arguments)
            error = (result.structured_content or {}).get("error") or {}
            if result.is_error and error.get("code") != refused:
                raise RuntimeError(f"{tool} failed: {result.structured_content}")

        def call(label: str, tool: str, arguments: dict[str, Any]) -> Callable[[], Awaitable[None]]:
            refused = label.rpartition("(")[2].rstrip(")") if label.endswith(")") else None
            return lambda: ok(tool, arguments, refused)

        server = build_server(Settings(database_url=url), jobs)
        async with Client(server) as client:
            tools = {
                "inspect_job": await _time(calls, lambda: ok("inspect_job", {"job_id": pick()})),
                "list_jobs": await _time(calls, lambda: ok("list_jobs", {})),
                "queue_stats": await _time(calls, lambda: ok("queue_stats", {})),
            }
            by_call: dict[str, dict[str, float]] = {}
            for label, tool, arguments in HISTORY_CALLS:
                if label == LONG_TRACE:
                    if trace_steps <= 0:
                        continue
                    arguments = {"job_id": trace_id}
                by_call[label] = await _time(calls, call(label, tool, arguments))
        engine = {
            "trace": await _time(calls, lambda: jobs.trace(pick())),
            "list": await _time(calls, lambda: jobs.list()),
            "stats": await _time(calls, lambda: jobs.stats([QUEUE])),
        }
    finally:
        await jobs.close()
    return {
        "rows": live + settled + (1 if trace_steps > 0 else 0),
        "live": live,
        "settled": settled,
        "trace_steps": trace_steps,
        "seed_s": seed_s,
        "fill_s": fill_s,
        "tools": tools,
        "history": by_call,
        "engine": engine,
    }
