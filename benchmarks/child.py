"""One benchmark step in a fresh process: `python -m benchmarks.child '<spec json>'`.

Every timed step runs in its own process, so each system starts cold, imports only itself, and
its worker's peak memory (VmHWM) is its own. The child speaks JSON lines on the file
descriptor that was its stdout (`{"event": "ready"}`, then one `{"event": "result", ...}`);
anything the libraries print goes to stderr, which the parent keeps in a log file.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any, TextIO, cast

from benchmarks.systems import load
from benchmarks.systems.base import Kind, System
from benchmarks.tally import Tally

_out: TextIO | None = None


def emit(event: str, **fields: Any) -> None:
    if _out is None:
        raise RuntimeError("emit() before the protocol channel was opened")
    _out.write(json.dumps({"event": event, **fields}) + "\n")
    _out.flush()


def peak_rss_mb() -> float:
    """This process's own peak RSS. Not `ru_maxrss`: Linux keeps that across exec, so a child
    reported the launcher's high-water mark whenever the launcher had grown larger (every
    system printed the same 51.7 MB); VmHWM belongs to the process image and starts afresh."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def role_install(system: System, spec: dict[str, Any]) -> dict[str, Any]:
    await system.install(spec["url"], spec["concurrency"])
    return {"settings": system.settings(spec["concurrency"])}


async def role_enqueue(system: System, spec: dict[str, Any]) -> dict[str, Any]:
    """Enqueue jobs 0..n-1: one per call (`batch` 1) or `batch` per call. Timed."""
    kind: Kind = spec["kind"]
    n: int = spec["n"]
    batch: int = spec["batch"]
    producer = await system.producer(spec["url"])
    try:
        started = time.monotonic()
        if batch <= 1:
            for i in range(n):
                await producer.enqueue_one(kind, i)
        else:
            for lo in range(0, n, batch):
                await producer.enqueue_many(kind, range(lo, min(n, lo + batch)))
        elapsed = time.monotonic() - started
    finally:
        await producer.close()
    return {"elapsed_s": elapsed, "jobs": n, "peak_rss_mb": peak_rss_mb()}


async def role_worker(system: System, spec: dict[str, Any]) -> dict[str, Any]:
    """Run one worker until jobs 0..n-1 have each run; then count what is left unsettled."""
    kind: Kind = spec["kind"]
    tally = Tally(
        spec["n"], keep_starts=spec.get("keep_starts", False), on_begin=lambda: emit("ready")
    )
    tally.bind()
    cpu_before = cpu_s()
    await system.run_worker(spec["url"], kind, spec["concurrency"], tally)
    stopped = time.monotonic()
    result = tally.summary()
    # CPU of the whole worker run (connect, work, stop) per job: the Python side's cost.
    result["cpu_ms_per_job"] = (cpu_s() - cpu_before) * 1000.0 / max(1, spec["n"])
    result["stop_s"] = stopped - tally.done_at if tally.complete else None
    result["peak_rss_mb"] = peak_rss_mb()
    result["unfinished"] = await system.unfinished(spec["url"], kind)
    if tally.start_times is not None:
        result["start_times"] = tally.start_times
    return result


async def role_latency_producer(system: System, spec: dict[str, Any]) -> dict[str, Any]:
    """Enqueue job 0 (a warm-up, not timed), then jobs 1..n `gap_ms` apart on a fixed
    schedule, noting when each enqueue call began."""
    kind: Kind = spec["kind"]
    n: int = spec["n"]
    gap = spec["gap_ms"] / 1000.0
    producer = await system.producer(spec["url"])
    times: list[float] = []
    returned: list[float] = []
    try:
        await producer.enqueue_one(kind, 0)
        origin = time.monotonic() + 10 * gap
        for i in range(1, n + 1):
            delay = origin + i * gap - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            times.append(time.monotonic())
            await producer.enqueue_one(kind, i)
            returned.append(time.monotonic())
    finally:
        await producer.close()
    return {"enqueue_times": times, "returned_times": returned}


async def role_mcp_tools(system: System, spec: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.mcp_tools import measure

    return await measure(
        spec["url"],
        spec["live"],
        spec["settled"],
        spec["calls"],
        spec["fill_batch"],
        spec.get("trace_steps", 0),
    )


ROLES: dict[str, Callable[[System, dict[str, Any]], Coroutine[Any, Any, dict[str, Any]]]] = {
    "install": role_install,
    "enqueue": role_enqueue,
    "worker": role_worker,
    "latency_producer": role_latency_producer,
    "mcp_tools": role_mcp_tools,
}


def main(argv: list[str]) -> int:
    global _out
    spec: dict[str, Any] = json.loads(argv[0])
    # The protocol keeps the real stdout; everything else that writes to fd 1 lands in stderr.
    _out = cast(TextIO, os.fdopen(os.dup(1), "w", buffering=1))
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    system = load(spec["system"])
    role = ROLES[spec["role"]]
    loop_name = spec.get("loop") or system.loop

    async def run() -> dict[str, Any]:
        return await role(system, spec)

    if loop_name == "uvloop":
        import uvloop

        result = uvloop.run(run())
    else:
        result = asyncio.run(run())
    emit("result", **result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
