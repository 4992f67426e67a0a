"""Workloads 1–7, driven from the parent: a fresh database each, timed steps in child processes.

Each function returns one result dict for one system. Every job that is enqueued is also run
and counted, so even the enqueue workloads end with an exactly-once check: workload 1's jobs
are drained afterwards (untimed), and workload 3 drains exactly the jobs workload 2 enqueued.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.databases import fresh_database
from benchmarks.launch import Child, run_child
from benchmarks.nats_space import fresh_namespace
from benchmarks.redis_space import fresh_keyspace
from benchmarks.sizes import Sizes
from benchmarks.systems import SYSTEMS
from benchmarks.systems.base import Kind

# Seconds a worker may take per job before the run is called stuck (a generous floor rate).
SECONDS_PER_JOB = 1 / 20
IDLE_BEFORE_LATENCY_S = 1.0


@dataclass
class Run:
    """Where and how this run executes."""

    dsn: str | None
    sizes: Sizes
    logs: Path
    # Worker children of these systems run under `py-spy record`, profiles written here.
    profile_dir: Path | None = None
    profile: frozenset[str] = frozenset()
    loop: str | None = None
    # Each system's settings as its install step reported them.
    settings: dict[str, Any] = field(default_factory=dict)
    # The Redis systems' server: a dedicated database number, emptied before and after each step.
    redis_url: str | None = None
    # The NATS systems' server: each step gets its own bucket (stream) name, deleted after.
    nats_url: str | None = None

    def database(self, key: str, label: str) -> AbstractAsyncContextManager[str]:
        """A fresh database (PostgreSQL, SQLite) or key space (Redis) for one step."""
        backend = SYSTEMS[key].backend
        if backend == "redis":
            if self.redis_url is None:
                raise ValueError(f"{key} needs --redis-url")
            return fresh_keyspace(self.redis_url, label)
        if backend == "nats":
            if self.nats_url is None:
                raise ValueError(f"{key} needs --nats-url")
            return fresh_namespace(self.nats_url, label)
        return fresh_database(self.dsn, backend, label)

    def spec(self, key: str, url: str, role: str, **fields: Any) -> dict[str, Any]:
        spec = {"system": key, "url": url, "role": role, "concurrency": self.sizes.concurrency}
        if self.loop:
            spec["loop"] = self.loop
        return {**spec, **fields}

    async def install(self, key: str, workload: str, url: str) -> None:
        result = await self.child(key, workload, self.spec(key, url, "install"), 180)
        self.settings.setdefault(key, result["settings"])

    def log(self, key: str, workload: str) -> Path:
        return self.logs / f"{key}.{workload}.log"

    async def child(
        self, key: str, workload: str, spec: dict[str, Any], limit_s: float
    ) -> dict[str, Any]:
        return await run_child(spec, self.log(key, workload), limit_s, wrap=self.wrap(spec))

    def wrap(self, spec: dict[str, Any]) -> list[str]:
        """`py-spy record` in front of a profiled worker: collapsed stacks, one file each."""
        key = spec["system"]
        if self.profile_dir is None or key not in self.profile or spec["role"] != "worker":
            return []
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        out = self.profile_dir / f"{key}.{spec['kind']}.{spec['n']}.txt"
        beside = Path(sys.executable).parent / "py-spy"
        spy = str(beside) if beside.exists() else shutil.which("py-spy") or "py-spy"
        return [spy, "record", "--format", "raw", "--rate", "250", "-o", str(out), "--"]


def worker_timeout(n: int) -> float:
    return 120 + n * SECONDS_PER_JOB


def exactly_once(worker: dict[str, Any]) -> bool:
    return bool(
        worker["missing"] == 0
        and worker["duplicates"] == 0
        and worker["out_of_range"] == 0
        and worker["executions"] == worker["jobs"]
        and worker["unfinished"] == 0
    )


def check_fields(worker: dict[str, Any]) -> dict[str, Any]:
    keys = ("jobs", "executions", "duplicates", "missing", "out_of_range", "unfinished")
    return {"exactly_once": exactly_once(worker), "check": {k: worker[k] for k in keys}}


def rate(n: int, seconds: float | None) -> float | None:
    return n / seconds if seconds else None


async def _drain(run: Run, key: str, name: str, url: str, kind: Kind, n: int) -> dict[str, Any]:
    spec = run.spec(key, url, "worker", kind=kind, n=n)
    worker = await run.child(key, name, spec, worker_timeout(n))
    return {
        "jobs": n,
        "elapsed_s": worker["elapsed_s"],
        "jobs_per_s": rate(n, worker["elapsed_s"]),
        "peak_rss_mb": worker["peak_rss_mb"],
        "cpu_ms_per_job": worker["cpu_ms_per_job"],
        "stop_s": worker["stop_s"],
        **check_fields(worker),
    }


async def _enqueue(run: Run, key: str, name: str, url: str, kind: Kind, n: int, batch: int) -> Any:
    spec = run.spec(key, url, "enqueue", kind=kind, n=n, batch=batch)
    return await run.child(key, name, spec, 120 + n / 50)


async def single_enqueue(run: Run, key: str) -> dict[str, Any]:
    """1. One job per call, sequentially; then the jobs are drained to check them."""
    n = run.sizes.single_enqueue
    async with run.database(key, f"{key}_1") as url:
        await run.install(key, "1", url)
        enq = await _enqueue(run, key, "1", url, "noop", n, 1)
        drained = await _drain(run, key, "1", url, "noop", n)
    return {
        "jobs": n,
        "elapsed_s": enq["elapsed_s"],
        "jobs_per_s": rate(n, enq["elapsed_s"]),
        "exactly_once": drained["exactly_once"],
        "check": drained["check"],
    }


async def batch_then_drain(run: Run, key: str, workload: int) -> dict[str, Any]:
    """2 + 3 (and 6): enqueue `batch` per call, then one worker drains them all."""
    n = run.sizes.drain if workload == 3 else run.sizes.scale
    name = str(workload)
    async with run.database(key, f"{key}_{workload}") as url:
        await run.install(key, name, url)
        enq = await _enqueue(run, key, name, url, "noop", n, run.sizes.batch)
        drained = await _drain(run, key, name, url, "noop", n)
    drained["enqueue"] = {
        "jobs": n,
        "batch": run.sizes.batch,
        "elapsed_s": enq["elapsed_s"],
        "jobs_per_s": rate(n, enq["elapsed_s"]),
    }
    return drained


def _quantile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def pickup_latency(run: Run, key: str) -> dict[str, Any]:
    """4. An idle worker; jobs enqueued `gap` ms apart; enqueue-call-start to handler start."""
    n = run.sizes.latency_jobs
    async with run.database(key, f"{key}_4") as url:
        await run.install(key, "4", url)
        spec = run.spec(key, url, "worker", kind="noop", n=n + 1, keep_starts=True)
        worker = await Child(spec, run.log(key, "4"), wrap=run.wrap(spec)).start()
        try:
            await worker.wait_for("ready", 120)
            await asyncio.sleep(IDLE_BEFORE_LATENCY_S)
            producer = run.spec(
                key, url, "latency_producer", kind="noop", n=n, gap_ms=run.sizes.latency_gap_ms
            )
            sent = await run_child(producer, run.log(key, "4p"), 120 + n)
            result = await worker.result(worker_timeout(n))
        finally:
            await worker.kill()
    starts = result.pop("start_times")
    latencies = [
        (starts[i] - sent["enqueue_times"][i - 1]) * 1000.0
        for i in range(1, n + 1)
        if starts[i] > 0
    ]
    # The same, measured from when the enqueue call returned (the job committed and visible):
    # the worker's own share, without the enqueue's round trips.
    after_commit = [
        (starts[i] - sent["returned_times"][i - 1]) * 1000.0
        for i in range(1, n + 1)
        if starts[i] > 0
    ]
    return {
        "jobs": n,
        "gap_ms": run.sizes.latency_gap_ms,
        "p50_ms": _quantile(latencies, 0.50) if latencies else None,
        "p95_ms": _quantile(latencies, 0.95) if latencies else None,
        "max_ms": max(latencies) if latencies else None,
        "p50_after_commit_ms": _quantile(after_commit, 0.50) if after_commit else None,
        "p95_after_commit_ms": _quantile(after_commit, 0.95) if after_commit else None,
        "peak_rss_mb": result["peak_rss_mb"],
        **check_fields(result),
    }


async def steps(run: Run, key: str) -> dict[str, Any]:
    """5. Jobs of 3 durable steps, enqueued in batches (untimed), drained by one worker."""
    n = run.sizes.steps
    async with run.database(key, f"{key}_5") as url:
        await run.install(key, "5", url)
        await _enqueue(run, key, "5", url, "steps", n, run.sizes.batch)
        return await _drain(run, key, "5", url, "steps", n)


async def mcp_tools(run: Run, key: str) -> dict[str, Any]:
    """7. MCP tools through the in-process client at small history and at large history."""
    sizes = run.sizes
    backend = SYSTEMS[key].backend
    out: dict[str, Any] = {}
    small_settled = sizes.tools_small // 10
    plans = (
        ("small", sizes.tools_small - small_settled, small_settled),
        ("large", sizes.tools_live, sizes.tools_settled(backend)),
    )
    for label, live, settled in plans:
        if label == "small" and sizes.tools_small <= 0:
            continue
        if label == "large" and settled <= 0:
            continue
        async with run.database(key, f"{key}_7{label}") as url:
            spec = run.spec(
                key,
                url,
                "mcp_tools",
                live=live,
                settled=settled,
                trace_steps=sizes.tools_trace_steps,
                calls=sizes.tool_calls,
                fill_batch=10_000,
            )
            out[label] = await run.child(key, "7", spec, 600 + (live + settled) / 200)
    return out


WORKLOADS = {
    1: "enqueue one per call",
    2: "batch enqueue",
    3: "drain no-op jobs",
    4: "pickup latency",
    5: "3-step jobs",
    6: "drain at scale",
    7: "MCP tool latency",
}
