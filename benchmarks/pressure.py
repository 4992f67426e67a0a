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
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import IO, Any

import asyncpg
from pydantic import BaseModel

from benchmarks.databases import dsn_missing, fresh_database, server_settings
from benchmarks.launch import REPO_ROOT
from benchmarks.pressure_report import exactly_once, render, summarise
from benchmarks.pressures import DRIVER_APP, PRESSURES, harness_conn
from engine import Enqueue, JobContext, JobRegistry, Worker, connect, job

PHASES = ("idle_tx", "rr_readers", "terminate", "idle_connections")
QUEUE = "pressure"

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
    conn = await harness_conn(url)
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
    monitor = await harness_conn(url)
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
        "phases": [summarise(p, runs, producer.failures, samples) for p in phases],
        "exactly_once": exactly_once(runs, rows, producer.enqueued),
        "samples": samples,
    }


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
    if dsn_missing(args):
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
