"""`python -m benchmarks.pressure --dsn …`: the queue under database pressure (#27, workload 8).

On one fresh PostgreSQL database a producer enqueues `--rate` jobs a second (every 100 ms) and a
worker process (`Worker(jobs, concurrency=16, queues=[…])`, as benchmarks/systems/mcpjobs.py)
runs them, throughout. Each phase is a baseline window, the pressure, then a recovery window:

- `idle_tx`: one session `BEGIN; SELECT txid_current();`, then idle, for the whole pressure;
- `rr_readers`: `--readers` REPEATABLE READ sessions, each one transaction for the whole
  pressure, scanning the jobs table (`count(*)`, `sum(attempt)`) in a loop;
- `terminate`: `pg_terminate_backend` of every driver connection (application_name `mcp-jobs`)
  of the database, `--terminate-every-ms` apart;
- `idle_connections`: `--idle-connections` sessions opened and held idle.

Every body records (job id, index, attempt, enqueue time, start time) in the worker process,
which writes them out when it stops; the report is computed from them afterwards: completions
per second, claim latency (enqueue call → body start, wall clock), recovery time, and the
exactly-once check against the jobs table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import tempfile
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import IO, Any

import asyncpg
from pydantic import BaseModel

from benchmarks.databases import fresh_database, server_settings
from benchmarks.launch import REPO_ROOT
from engine import Enqueue, JobContext, JobRegistry, Worker, connect, job

PHASES = ("idle_tx", "rr_readers", "terminate", "idle_connections")
QUEUE = "pressure"
# What the PostgreSQL driver names its sessions (engine/drivers/postgres/connections.py); the
# harness names its own otherwise, so the terminator never ends them.
DRIVER_APP = "mcp-jobs"
HARNESS_APP = "pressure-harness"
# Recovered: the mean completion rate over this many 1 s buckets is within 10% of the baseline.
RECOVERY_WINDOW_S = 5
RECOVERY_TOLERANCE = 0.10

REGISTRY = JobRegistry()
# (job id, index, attempt, enqueued at, started at): appended by every body in the worker.
_RUNS: list[tuple[str, int, int, float, float]] = []


class Item(BaseModel):
    i: int
    t: float  # wall-clock seconds when the producer's enqueue call began


def _key(item: Item) -> str:
    return str(item.i)


@job(registry=REGISTRY, name="pressure_noop", queue=QUEUE, idempotency_key=_key)
async def pressure_noop(input: Item, ctx: JobContext) -> None:
    _RUNS.append((ctx.job_id, input.i, ctx.attempt, input.t, time.time()))


# --- the worker process ------------------------------------------------------------------------


def _emit(out: Any, event: str, **fields: Any) -> None:
    out.write(json.dumps({"event": event, **fields}) + "\n")
    out.flush()


async def worker_process(url: str, out_file: Path, concurrency: int) -> int:
    """Run one worker until "stop" arrives on stdin; then write every run to `out_file`.
    Prints JSON lines: "ready", a "tick" with the runs so far every second, "result"."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed goes to the log, not the protocol
    jobs = await connect(url, registry=REGISTRY)
    worker = Worker(jobs, concurrency=concurrency, queues=[QUEUE])
    running = asyncio.create_task(worker.run())
    loop = asyncio.get_running_loop()
    stop = asyncio.ensure_future(loop.run_in_executor(None, sys.stdin.readline))
    _emit(proto, "ready")
    while not stop.done() and not running.done():
        await asyncio.wait([stop, running], timeout=1.0)
        _emit(proto, "tick", runs=len(_RUNS), at=time.time())
    error = None
    if running.done():
        error = repr(running.exception()) if running.exception() else "worker.run() returned"
    else:
        worker.stop()
        try:
            async with asyncio.timeout(60):
                await running
        except Exception as exc:  # reported, not raised: the runs so far are still the data
            error = repr(exc)
    await jobs.close()
    await asyncio.to_thread(out_file.write_text, json.dumps(_RUNS))
    _emit(proto, "result", runs=len(_RUNS), error=error)
    proto.close()
    return 0


class WorkerChild:
    """The worker process, seen from the harness: start, ticks, stop, its runs."""

    def __init__(self, url: str, concurrency: int, folder: Path) -> None:
        self.url = url
        self.concurrency = concurrency
        self.out_file = folder / "runs.json"
        self.log = folder / "worker.log"
        self.runs_seen = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._log_file: IO[str] | None = None
        self._reader: asyncio.Task[dict[str, Any] | None] | None = None

    async def start(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        self._log_file = self.log.open("a")
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.pressure",
            "--role",
            "worker",
            "--url",
            self.url,
            "--out",
            str(self.out_file),
            "--concurrency",
            str(self.concurrency),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._log_file,
            cwd=str(REPO_ROOT),
            env=env,
        )
        ready = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read(ready))
        async with asyncio.timeout(60):
            await ready

    async def _read(self, ready: asyncio.Future[None]) -> dict[str, Any] | None:
        assert self._proc is not None and self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            with contextlib.suppress(ValueError):
                message = json.loads(line)
                if message["event"] == "ready" and not ready.done():
                    ready.set_result(None)
                elif message["event"] == "tick":
                    self.runs_seen = message["runs"]
                elif message["event"] == "result":
                    return dict(message)
        if not ready.done():
            ready.set_exception(RuntimeError(f"the worker exited (log {self.log})"))
        return None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def stop(self) -> tuple[list[list[Any]], str | None]:
        """Stop the worker (bounded) and read every run it recorded."""
        assert self._proc is not None and self._proc.stdin is not None and self._reader
        error: str | None = None
        try:
            self._proc.stdin.write(b"stop\n")
            await self._proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            error = "the worker process had exited"
        try:
            async with asyncio.timeout(90):
                result = await self._reader
                await self._proc.wait()
        except TimeoutError:
            self._proc.kill()
            await self._proc.wait()
            return [], f"the worker did not stop within 90 s (log {self.log})"
        finally:
            if self._log_file is not None:
                self._log_file.close()
        if result is None:
            return [], error or f"the worker exited without a result (log {self.log})"
        runs: list[list[Any]] = json.loads(await asyncio.to_thread(self.out_file.read_text))
        return runs, result.get("error")


# --- the pressures -----------------------------------------------------------------------------


async def _harness_conn(url: str, app: str = HARNESS_APP) -> asyncpg.Connection[asyncpg.Record]:
    return await asyncpg.connect(url, server_settings={"application_name": app})


async def idle_tx(url: str, seconds: float, options: argparse.Namespace) -> dict[str, Any]:
    conn = await _harness_conn(url)
    try:
        tx = conn.transaction()
        await tx.start()
        xid = await conn.fetchval("SELECT txid_current()")
        await asyncio.sleep(seconds)
        await tx.rollback()
    finally:
        await conn.close()
    return {"xid": int(xid)}


async def rr_readers(url: str, seconds: float, options: argparse.Namespace) -> dict[str, Any]:
    end = time.monotonic() + seconds

    async def reader() -> int:
        scans = 0
        conn = await _harness_conn(url)
        try:
            # One snapshot for the whole pressure, as a long report or pg_dump holds one.
            async with conn.transaction(isolation="repeatable_read"):
                while time.monotonic() < end:
                    await conn.fetchrow("SELECT count(*), sum(attempt) FROM mcp_jobs.jobs")
                    scans += 1
        finally:
            await conn.close()
        return scans

    scans = await asyncio.gather(*(reader() for _ in range(options.readers)))
    return {"readers": options.readers, "scans": sum(scans)}


async def terminate(url: str, seconds: float, options: argparse.Namespace) -> dict[str, Any]:
    end = time.monotonic() + seconds
    conn = await _harness_conn(url)
    rounds = ended = 0
    try:
        while time.monotonic() < end:
            ended += await conn.fetchval(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name = $1",
                DRIVER_APP,
            )
            rounds += 1
            await asyncio.sleep(options.terminate_every_ms / 1000)
    finally:
        await conn.close()
    return {"rounds": rounds, "terminated": ended}


async def idle_connections(url: str, seconds: float, options: argparse.Namespace) -> dict[str, Any]:
    held: list[asyncpg.Connection[asyncpg.Record]] = []
    refused: list[str] = []
    opened_at = time.monotonic()
    try:
        # In groups of 20: 300 at once is a connection storm, a different pressure.
        for lo in range(0, options.idle_connections, 20):
            count = min(20, options.idle_connections - lo)
            got = await asyncio.gather(
                *(_harness_conn(url, "pressure-idle") for _ in range(count)),
                return_exceptions=True,
            )
            for conn in got:
                if isinstance(conn, BaseException):
                    refused.append(repr(conn))
                else:
                    held.append(conn)
        open_s = time.monotonic() - opened_at
        await asyncio.sleep(max(0.0, seconds - open_s))
    finally:
        await asyncio.gather(*(c.close() for c in held), return_exceptions=True)
    return {"held": len(held), "refused": len(refused), "open_s": round(open_s, 2)}


PRESSURES: dict[str, Callable[[str, float, argparse.Namespace], Awaitable[dict[str, Any]]]] = {
    "idle_tx": idle_tx,
    "rr_readers": rr_readers,
    "terminate": terminate,
    "idle_connections": idle_connections,
}


# --- the steady load and the samples -----------------------------------------------------------


class Producer:
    """Enqueues `rate` jobs a second, `rate // 10` every 100 ms, on a fixed schedule. A failed
    call is retried with the same items until it goes in; every failure is counted."""

    def __init__(self, url: str, rate: int) -> None:
        self.url = url
        self.per_tick = max(1, rate // 10)
        self.enqueued = 0
        self.failures: list[tuple[float, str]] = []
        self._stop = asyncio.Event()

    async def run(self) -> None:
        jobs = await connect(self.url, registry=REGISTRY)
        try:
            origin = time.monotonic()
            tick = 0
            while not self._stop.is_set():
                now = time.time()
                items = [
                    Enqueue(pressure_noop, Item(i=self.enqueued + k, t=now))
                    for k in range(self.per_tick)
                ]
                while True:
                    try:
                        await jobs.enqueue_many(items)
                        break
                    except Exception as exc:  # any failure under pressure is data: count, retry
                        self.failures.append((time.time(), type(exc).__name__))
                        await asyncio.sleep(0.05)
                self.enqueued += self.per_tick
                tick += 1
                delay = origin + tick * 0.1 - time.monotonic()
                if delay > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), delay)
        finally:
            await jobs.close()

    def stop(self) -> None:
        self._stop.set()


_TABLE_SQL = """
SELECT n_dead_tup, n_live_tup, vacuum_count, autovacuum_count
FROM pg_stat_user_tables WHERE schemaname = 'mcp_jobs' AND relname = 'jobs'
"""
_SESSIONS_SQL = """
SELECT count(*) FILTER (WHERE application_name = $1) AS driver, count(*) AS total,
       max(age(backend_xmin)) AS oldest_xmin_age
FROM pg_stat_activity WHERE datname = current_database()
"""


async def table_stats(conn: asyncpg.Connection[asyncpg.Record]) -> dict[str, Any]:
    row = await conn.fetchrow(_TABLE_SQL)
    sessions = await conn.fetchrow(_SESSIONS_SQL, DRIVER_APP)
    out = dict(row) if row is not None else {}
    out.update(dict(sessions) if sessions is not None else {})
    out["at"] = time.time()
    return out


async def sample_every_second(url: str, samples: list[dict[str, Any]], stop: asyncio.Event) -> None:
    conn = await _harness_conn(url)
    try:
        while not stop.is_set():
            samples.append(await table_stats(conn))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
    finally:
        await conn.close()


# --- the run -----------------------------------------------------------------------------------


def _log_folder(logs: Path | None) -> Path:
    folder = Path(logs or tempfile.mkdtemp(prefix="pressure_"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


async def _drained(conn: asyncpg.Connection[asyncpg.Record], limit_s: float) -> float | None:
    """Seconds until no job of the queue is unsettled, or None past `limit_s`."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        left = await conn.fetchval(
            "SELECT count(*) FROM mcp_jobs.jobs WHERE queue = $1 AND state <> 'done'", QUEUE
        )
        if left == 0:
            return time.monotonic() - started
        await asyncio.sleep(0.5)
    return None


async def run(
    url: str, options: argparse.Namespace, echo: Callable[[str], None] = print
) -> dict[str, Any]:
    """Every phase of `options.phases` in turn under one steady load; the report."""
    jobs = await connect(url, registry=REGISTRY, migrate=True)
    await jobs.close()
    folder = await asyncio.to_thread(_log_folder, options.logs)
    worker = WorkerChild(url, options.concurrency, folder)
    await worker.start()
    producer = Producer(url, options.rate)
    producing = asyncio.create_task(producer.run())
    samples: list[dict[str, Any]] = []
    stop_sampling = asyncio.Event()
    sampling = asyncio.create_task(sample_every_second(url, samples, stop_sampling))
    monitor = await _harness_conn(url)
    phases: list[dict[str, Any]] = []
    began = time.time()
    try:
        for name in options.phases:
            phase: dict[str, Any] = {"phase": name, "baseline_from": time.time()}
            await asyncio.sleep(options.baseline_seconds)
            phase["dead_at_start"] = (await table_stats(monitor))["n_dead_tup"]
            phase["pressure_from"] = time.time()
            echo(f"{name}: pressure on ({worker.runs_seen:,} runs, {producer.enqueued:,} queued)")
            try:
                phase["pressure"] = await PRESSURES[name](url, options.phase_seconds, options)
            except Exception as exc:  # a pressure that could not be applied is reported
                phase["pressure"] = {"error": repr(exc)}
            phase["pressure_to"] = time.time()
            phase["dead_at_end"] = (await table_stats(monitor))["n_dead_tup"]
            echo(
                f"{name}: pressure off ({worker.runs_seen:,} runs, {producer.enqueued:,} enqueued)"
            )
            await asyncio.sleep(options.recovery_seconds)
            phase["recovery_to"] = time.time()
            phase["dead_after_recovery"] = (await table_stats(monitor))["n_dead_tup"]
            if not worker.alive:
                echo(f"{name}: the worker process exited (log {worker.log})")
            phases.append(phase)
    finally:
        producer.stop()
        async with asyncio.timeout(60):
            await producing
    drain_s = await _drained(monitor, options.drain_limit_s)
    runs, worker_error = await worker.stop()
    rows = await monitor.fetch(
        "SELECT id, (input->>'i')::int AS i, state FROM mcp_jobs.jobs WHERE queue = $1", QUEUE
    )
    await monitor.close()
    stop_sampling.set()
    await sampling
    settings = await server_settings(url)
    return {
        "settings": settings,
        "options": {
            k: v for k, v in vars(options).items() if k not in ("dsn", "json", "logs", "role")
        },
        "began": began,
        "worker_log": str(worker.log),
        "worker_error": worker_error,
        "drain_after_s": drain_s,
        "phases": [summarise(p, runs, producer, samples, options) for p in phases],
        "exactly_once": exactly_once(runs, rows, producer.enqueued),
        "samples": samples,
    }


# --- the report --------------------------------------------------------------------------------


def _p(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarise(
    phase: dict[str, Any],
    runs: list[list[Any]],
    producer: Producer,
    samples: list[dict[str, Any]],
    options: argparse.Namespace,
) -> dict[str, Any]:
    starts = sorted(r[4] for r in runs)
    b0, p0, p1, r1 = (
        phase[k] for k in ("baseline_from", "pressure_from", "pressure_to", "recovery_to")
    )

    def rate(a: float, b: float) -> float:
        return (bisect_left(starts, b) - bisect_left(starts, a)) / (b - a) if b > a else 0.0

    def latencies(a: float, b: float) -> list[float]:
        return [(r[4] - r[3]) * 1000 for r in runs if a <= r[4] < b]

    before = rate(b0, p0)
    recovery: int | None = None
    for k in range(0, max(0, int(r1 - p1) - RECOVERY_WINDOW_S + 1)):
        window = rate(p1 + k, p1 + k + RECOVERY_WINDOW_S)
        if before and abs(window - before) <= RECOVERY_TOLERANCE * before:
            recovery = k
            break
    buckets = [rate(p0 + k, p0 + k + 1) for k in range(int(p1 - p0))]
    during = [s for s in samples if p0 <= s["at"] < p1]
    during_lat = latencies(p0, p1)
    before_lat = latencies(b0, p0)
    return {
        "phase": phase["phase"],
        "pressure": phase["pressure"],
        "rate_before": before,
        "rate_during": rate(p0, p1),
        "rate_after": rate(p1, r1),
        "worst_second_during": min(buckets, default=None),
        "seconds_without_completions": sum(1 for b in buckets if b == 0),
        "claim_p50_ms_before": _p(before_lat, 0.5),
        "claim_p95_ms_before": _p(before_lat, 0.95),
        "claim_p50_ms_during": _p(during_lat, 0.5),
        "claim_p95_ms_during": _p(during_lat, 0.95),
        "claim_max_ms_during": max(during_lat, default=None),
        "dead_tuples_start": phase["dead_at_start"],
        "dead_tuples_end": phase["dead_at_end"],
        "dead_tuples_max_during": max((s["n_dead_tup"] or 0 for s in during), default=None),
        "dead_tuples_after_recovery": phase["dead_after_recovery"],
        # Jobs whose enqueue began before the pressure ended and that started after it.
        "backlog_at_end": sum(1 for r in runs if r[3] < p1 <= r[4]),
        "recovery_s": recovery,
        "recovered_within_window": recovery is not None,
        "producer_failures": Counter(name for at, name in producer.failures if p0 <= at < r1),
        "driver_sessions_during": [
            min((s["driver"] for s in during), default=None),
            max((s["driver"] for s in during), default=None),
        ],
        "oldest_xmin_age_max": max((s["oldest_xmin_age"] or 0 for s in during), default=None),
        "seconds": [round(p0 - b0, 1), round(p1 - p0, 1), round(r1 - p1, 1)],
        "window": [b0, p0, p1, r1],
    }


def exactly_once(runs: list[list[Any]], rows: Sequence[Any], enqueued: int) -> dict[str, Any]:
    """Every enqueued index has a row, every row is done and its body ran exactly once."""
    executions = Counter(r[0] for r in runs)
    states = {row["id"]: row["state"] for row in rows}
    per_index = Counter(row["i"] for row in rows)
    result = {
        "enqueued": enqueued,
        "rows": len(states),
        "executions": len(runs),
        "not_done": sum(1 for s in states.values() if s != "done"),
        "never_ran": sum(1 for job_id in states if executions[job_id] == 0),
        "ran_twice": sum(1 for n in executions.values() if n > 1),
        "ran_twice_ids": sorted(j for j, n in executions.items() if n > 1)[:20],
        "unknown_ids": sum(1 for j in executions if j not in states),
        "indexes_missing": sum(1 for i in range(enqueued) if per_index[i] == 0),
        # An enqueue retried after a lost reply whose first try had committed (and whose job
        # had already run, so no live row deduped it): a second job for one index.
        "indexes_with_two_rows": sum(1 for n in per_index.values() if n > 1),
    }
    keys = ("not_done", "never_ran", "ran_twice", "unknown_ids", "indexes_missing")
    result["ok"] = all(result[k] == 0 for k in keys)
    return result


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def render(report: dict[str, Any]) -> str:
    head = (
        "| pressure | jobs/s before | during | after | worst 1 s during | claim p95 ms before"
        " | during | dead tuples start → end | backlog at end | recovery s |"
    )
    lines = [head, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for p in report["phases"]:
        recovery = _fmt(p["recovery_s"]) if p["recovered_within_window"] else "not recovered"
        lines.append(
            f"| {p['phase']} | {_fmt(p['rate_before'])} | {_fmt(p['rate_during'])}"
            f" | {_fmt(p['rate_after'])} | {_fmt(p['worst_second_during'])}"
            f" | {_fmt(p['claim_p95_ms_before'], 1)} | {_fmt(p['claim_p95_ms_during'], 1)}"
            f" | {_fmt(p['dead_tuples_start'])} → {_fmt(p['dead_tuples_end'])}"
            f" | {_fmt(p['backlog_at_end'])} | {recovery} |"
        )
    once = report["exactly_once"]
    lines.append("")
    lines.append(
        f"exactly once: {'yes' if once['ok'] else 'NO'} — {once['enqueued']:,} enqueued,"
        f" {once['rows']:,} rows, {once['executions']:,} executions, not done"
        f" {once['not_done']}, never ran {once['never_ran']}, ran twice {once['ran_twice']},"
        f" indexes missing {once['indexes_missing']}, second rows {once['indexes_with_two_rows']}"
    )
    return "\n".join(lines)


# --- the command -------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pressure")
    parser.add_argument(
        "--dsn",
        default=os.environ.get("MCP_JOBS_BENCH_DSN") or os.environ.get("MCP_JOBS_TEST_PG_DSN"),
        help="an admin DSN on the server (a fresh database is made on it and dropped)",
    )
    parser.add_argument(
        "--phases", default="all", help="all, or a comma list of " + ",".join(PHASES)
    )
    parser.add_argument("--phase-seconds", type=float, default=60.0, help="each pressure's length")
    parser.add_argument("--baseline-seconds", type=float, default=20.0)
    parser.add_argument("--recovery-seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=int, default=500, help="jobs enqueued a second")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--terminate-every-ms", type=int, default=250)
    parser.add_argument("--idle-connections", type=int, default=300)
    parser.add_argument("--drain-limit-s", type=float, default=120.0)
    parser.add_argument("--json", type=Path, help="write the whole report here")
    parser.add_argument("--logs", type=Path, help="the worker's log and runs file go here")
    # The worker process (started by the harness, not by hand).
    parser.add_argument("--role", choices=("harness", "worker"), default="harness")
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    return parser


def parse_phases(text: str) -> list[str]:
    if text == "all":
        return list(PHASES)
    chosen = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in PHASES]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"unknown phases {unknown}; choose from {PHASES}")
    return chosen


def _run_loop(main: Callable[[], Awaitable[Any]]) -> Any:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main())  # type: ignore[arg-type]
    return uvloop.run(main())  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if args.role == "worker":
        return int(_run_loop(lambda: worker_process(args.url, args.out, args.concurrency)))
    if not args.dsn:
        print("--dsn (or MCP_JOBS_BENCH_DSN) is required", file=sys.stderr)
        return 2
    try:
        args.phases = parse_phases(args.phases)
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))

    async def go() -> dict[str, Any]:
        async with fresh_database(args.dsn, "postgres", "pressure") as url:
            return await run(url, args)

    report = _run_loop(go)
    print(render(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    return 0 if report["exactly_once"]["ok"] and report["worker_error"] is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
