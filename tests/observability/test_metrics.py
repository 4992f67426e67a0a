"""Prometheus metrics: the gauges say what `stats()` says, on every driver, and rule 7 keeps them
honest at saturation; the counters follow the worker's events; the endpoint is real HTTP."""

from __future__ import annotations

import os
import socket

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Limits, ManualClock, Retry, Worker, job
from engine.errors import JobsError
from engine.metrics import (
    DEFAULT_REFRESH_MS,
    LIVE_WORKER_WINDOW_MS,
    WorkerMetrics,
    instrument,
    serve_metrics,
)
from engine.retry import retry_schedule
from engine.run_job import Permanent
from engine.testing.blocked import wait_all_tasks_blocked
from schemas.stats import WorkerInfo
from tests.observability.scrape import http_get, samples, value
from tests.support.fix_lines import run_fix
from tests.support.observe import Recorder


class Item(BaseModel):
    n: int


def text(metrics: WorkerMetrics) -> str:
    body, content_type = metrics.exposition()
    assert content_type.startswith("text/plain")
    return body.decode()


async def test_a_saturated_queue_reports_depth_and_a_growing_age_not_suspensions(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    """20 jobs, concurrency 10, global cap 1: nine claims are shed and stay READY, so the depth
    gauge reads 19-20 and the oldest-ready age grows. Had the sheds been parked, depth would
    read ~10 and the suspended gauge would hide them (rule 7)."""
    gate = anyio.Event()
    running = anyio.Event()

    @job(idempotency_key=lambda i: f"i:{i.n}", registry=registry)
    async def work(input: Item, ctx: JobContext) -> None:
        running.set()
        await gate.wait()

    for n in range(20):
        await jobs.enqueue(work, {"n": n})
    metrics = WorkerMetrics()
    recorder = Recorder()
    worker = Worker(
        jobs,
        concurrency=10,
        limits=Limits(global_cap=1),
        listeners=[recorder, metrics],
        lease_ms=600_000,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run_until_idle)
        with anyio.fail_after(10):
            await running.wait()
        await recorder.wait("shed", count=9)
        await metrics.refresh(jobs)
        first = text(metrics)
        clock.advance(120_000)
        await metrics.refresh(jobs)
        later = text(metrics)
        gate.set()

    for exposition in (first, later):
        depth = value(exposition, "mcp_jobs_queue_depth", queue="default")
        assert depth is not None and 19 <= depth <= 20
        assert value(exposition, "mcp_jobs_queue_suspended_jobs", queue="default") == 0
        assert value(exposition, "mcp_jobs_queue_running_jobs", queue="default") == 1
    age_first = value(first, "mcp_jobs_queue_oldest_ready_seconds", queue="default")
    age_later = value(later, "mcp_jobs_queue_oldest_ready_seconds", queue="default")
    assert age_first is not None and age_later is not None
    assert age_later >= age_first + 120
    sheds = value(later, "mcp_jobs_jobs_shed_total", queue="default", name="work", reason="global")
    assert sheds == 9
    assert value(later, "mcp_jobs_jobs_started_total", name="work") == 1
    # The tenant or queue a cap names never becomes a label value: only the cap's kind does.
    assert {
        ls.get("reason") for n, ls, _ in samples(later) if n.startswith("mcp_jobs_jobs_shed")
    } == {"global"}


async def test_a_sleeping_job_is_counted_suspended_not_ready(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: f"i:{i.n}", queue="naps", registry=registry)
    async def napper(input: Item, ctx: JobContext) -> None:
        await ctx.step.sleep("nap", 3600)

    await jobs.enqueue(napper, {"n": 1})
    metrics = WorkerMetrics()
    await Worker(jobs, listeners=[metrics]).run_until_idle()
    clock.advance(600_000)  # ten minutes on: a ready job would show a ten-minute age by now
    await metrics.refresh(jobs)
    exposition = text(metrics)
    assert value(exposition, "mcp_jobs_queue_suspended_jobs", queue="naps") == 1
    assert value(exposition, "mcp_jobs_queue_depth", queue="naps") == 0
    assert value(exposition, "mcp_jobs_queue_oldest_ready_seconds", queue="naps") == 0
    assert value(exposition, "mcp_jobs_jobs_parked_total", name="napper", reason="sleep") == 1
    assert value(exposition, "mcp_jobs_jobs_succeeded_total", name="napper") is None


async def test_dead_letters_failures_and_retries_are_counted_and_match_stats(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    policy = Retry(attempts=2)

    @job(idempotency_key=lambda i: f"i:{i.n}", queue="q", retry=policy, registry=registry)
    async def flaky(input: Item, ctx: JobContext) -> None:
        if input.n == 0:
            raise Permanent("bad input")
        if input.n < 3:
            raise RuntimeError("down")

    for n in range(4):
        await jobs.enqueue(flaky, {"n": n})
    metrics = WorkerMetrics()
    worker = Worker(jobs, listeners=[metrics])
    await worker.run_until_idle()
    clock.advance(sum(retry_schedule(policy)) + 1)
    await worker.run_until_idle()
    await metrics.refresh(jobs)
    exposition = text(metrics)

    labels = {"queue": "q", "name": "flaky"}
    assert value(exposition, "mcp_jobs_queue_dead_jobs", queue="q") == 2
    assert value(exposition, "mcp_jobs_queue_failed_jobs", queue="q") == 1
    assert value(exposition, "mcp_jobs_jobs_dead_lettered_total", **labels) == 2
    assert value(exposition, "mcp_jobs_jobs_failed_total", **labels) == 1
    assert value(exposition, "mcp_jobs_jobs_retried_total", **labels) == 2
    assert value(exposition, "mcp_jobs_jobs_succeeded_total", **labels) == 1
    assert value(exposition, "mcp_jobs_jobs_started_total", **labels) == 6
    assert value(exposition, "mcp_jobs_job_run_duration_seconds_count", **labels) == 6

    # The gauges are the numbers queue_stats and diagnose_queue read, not a second count.
    (stats,) = await jobs.stats()
    for gauge, field in [
        ("queue_depth", stats.ready),
        ("queue_dead_jobs", stats.dead),
        ("queue_failed_jobs", stats.failed),
        ("queue_suspended_jobs", stats.suspended),
        ("queue_delayed_jobs", stats.delayed),
        ("queue_running_jobs", stats.running),
        ("queue_expired_leases", stats.expired_leases),
    ]:
        assert value(exposition, f"mcp_jobs_{gauge}", queue="q") == field, gauge
    assert value(exposition, "mcp_jobs_stats_refreshed_timestamp_seconds") == clock.now_ms() / 1000


async def test_workers_alive_counts_recent_presence_only(jobs: Jobs, clock: ManualClock) -> None:
    metrics = WorkerMetrics()

    def seen(worker_id: str) -> WorkerInfo:
        now = clock.now_ms()
        return WorkerInfo(
            id=worker_id,
            hostname="host",
            pid=os.getpid(),
            queues=None,
            concurrency=1,
            started_at=now,
            last_seen_at=now,
        )

    await jobs.driver.worker_seen(seen("w-old"))
    clock.advance(LIVE_WORKER_WINDOW_MS + 1)
    await jobs.driver.worker_seen(seen("w-new"))
    await metrics.refresh(jobs)
    assert value(text(metrics), "mcp_jobs_workers_alive") == 1


async def test_the_endpoint_serves_exposition_and_refreshes_on_the_interval(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: f"i:{i.n}", queue="mail", registry=registry)
    async def send(input: Item, ctx: JobContext) -> None:
        return None

    for n in range(3):
        await jobs.enqueue(send, {"n": n})
    worker = Worker(jobs)
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_metrics, worker, 0)
        metrics = instrument(worker)
        await worker.presence.beat(publish=False)  # its check-in: the first reading follows
        status, headers, body = await http_get(port)
        assert status == 200
        assert headers["content-type"].startswith("text/plain; version=0.0.4")
        assert int(headers["content-length"]) == len(body)
        assert value(body.decode(), "mcp_jobs_queue_depth", queue="mail") == 3

        await jobs.enqueue(send, {"n": 3})
        await jobs.enqueue(send, {"n": 4})
        refreshes = metrics.refreshes
        clock.advance(DEFAULT_REFRESH_MS)
        with anyio.fail_after(10):
            await metrics.wait_refreshed(refreshes)
        _, _, body = await http_get(port)
        assert value(body.decode(), "mcp_jobs_queue_depth", queue="mail") == 5

        # The counters come from the attached listener: run the jobs and scrape again.
        await worker.run_until_idle()
        _, _, body = await http_get(port)
        assert value(body.decode(), "mcp_jobs_jobs_succeeded_total", name="send") == 5

        status, _, _ = await http_get(port, "/nowhere")
        assert status == 404
        status, _, _ = await http_get(port, method="POST")
        assert status == 405
        status, headers, body = await http_get(port, method="HEAD")
        assert (status, body) == (200, b"")
        status, headers, body = await http_get(
            port, accept="application/openmetrics-text; version=1.0.0"
        )
        assert status == 200 and headers["content-type"].startswith("application/openmetrics-text")
        assert body.endswith(b"# EOF\n")
        tg.cancel_scope.cancel()


@pytest.mark.drivers("memory", reason="binding a port does not involve the database")
async def test_a_taken_port_is_a_typed_error(jobs: Jobs) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    try:
        taken = holder.getsockname()[1]
        with pytest.raises(JobsError) as raised:
            await serve_metrics(Worker(jobs), taken)
        assert raised.value.code == "METRICS_PORT_UNAVAILABLE"
        assert not raised.value.retryable  # the fix is another port
        # Run as given: the fix prints a port free now.
        free = int(run_fix(raised.value.fix))
        assert free != taken
    finally:
        holder.close()
    for bad in (-1, 65536, True, "9100"):
        with pytest.raises(JobsError) as invalid:
            await serve_metrics(Worker(jobs), bad)  # type: ignore[arg-type]
        assert invalid.value.code == "INVALID_ARGUMENT"


@pytest.mark.drivers("memory", reason="registry isolation does not involve the database")
async def test_each_worker_gets_its_own_registry(jobs: Jobs) -> None:
    """Two in one process must not collide (the global registry would refuse the second)."""
    first, second = Worker(jobs), Worker(jobs)
    a, b = instrument(first), instrument(second)
    assert a is not b and a.registry is not b.registry
    assert instrument(first) is a
    with pytest.raises(JobsError) as raised:
        instrument(first, WorkerMetrics())
    assert raised.value.code == "INVALID_ARGUMENT"
    bare = WorkerMetrics(namespace="")
    bare.observe_stats([], workers_alive=2, at_ms=0)
    assert value(text(bare), "workers_alive") == 2


async def test_each_start_records_how_long_it_waited_by_priority(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: f"w:{i.n}", queue="q", registry=registry)
    async def quick(input: Item, ctx: JobContext) -> None:
        return None

    await jobs.enqueue(quick, {"n": 1})
    await jobs.enqueue(quick, {"n": 2}, priority=7)
    clock.advance(2_500)  # both waited 2.5 s before a worker came
    metrics = WorkerMetrics()
    await Worker(jobs, listeners=[metrics]).run_until_idle()
    exposition = text(metrics)
    for priority in ("0", "7"):
        labels = {"queue": "q", "priority": priority}
        assert value(exposition, "mcp_jobs_job_wait_seconds_count", **labels) == 1
        assert value(exposition, "mcp_jobs_job_wait_seconds_sum", **labels) == 2.5


async def test_a_worker_of_some_queues_publishes_every_queues_gauges(
    jobs: Jobs, registry: JobRegistry
) -> None:
    """The gauges are database-wide, as the README says: a queue whose own workers all died
    still has its depth published by the workers of other queues (and its alert can fire)."""

    @job(idempotency_key=lambda i: f"i:{i.n}", queue="mail", registry=registry)
    async def send(input: Item, ctx: JobContext) -> None:
        return None

    @job(idempotency_key=lambda i: f"i:{i.n}", queue="orphaned", registry=registry)
    async def left(input: Item, ctx: JobContext) -> None:
        return None

    await jobs.enqueue(send, {"n": 1})
    for n in range(3):
        await jobs.enqueue(left, {"n": n})
    worker = Worker(jobs, queues=["mail"])
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_metrics, worker, 0)
        await worker.presence.beat(publish=False)  # its check-in, as its run makes first
        _, _, body = await http_get(port)
        assert value(body.decode(), "mcp_jobs_queue_depth", queue="mail") == 1
        assert value(body.decode(), "mcp_jobs_queue_depth", queue="orphaned") == 3
        tg.cancel_scope.cancel()


async def test_the_first_reading_counts_the_worker_that_serves_it(jobs: Jobs) -> None:
    """The first refresh waits for the worker's check-in: a fresh worker's first scrape does
    not say that no worker is alive."""
    worker = Worker(jobs, queues=["q"], scheduler=False, outbox_relay=False)
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_metrics, worker, 0)
        tg.start_soon(worker.run)
        _, _, body = await http_get(port)
        assert value(body.decode(), "mcp_jobs_workers_alive") == 1
        with anyio.fail_after(10):
            await worker.stop()
        tg.cancel_scope.cancel()


async def test_a_worker_that_never_checks_in_is_read_after_one_interval(
    jobs: Jobs, clock: ManualClock
) -> None:
    """Waiting for the check-in is bounded: one refresh interval of the worker's clock."""
    worker = Worker(jobs)
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_metrics, worker, 0)
        metrics = instrument(worker)
        await wait_all_tasks_blocked()
        assert metrics.refreshes == 0  # waiting for the check-in
        clock.advance(DEFAULT_REFRESH_MS)
        with anyio.fail_after(10):
            await metrics.wait_refreshed(0)
        _, _, body = await http_get(port)
        assert value(body.decode(), "mcp_jobs_workers_alive") == 0
        assert value(body.decode(), "mcp_jobs_stats_refreshed_timestamp_seconds") == (
            clock.now_ms() / 1000
        )
        tg.cancel_scope.cancel()


@pytest.mark.drivers("memory", reason="binding an address does not involve the database")
async def test_the_endpoint_listens_on_the_host_given_and_refuses_a_foreign_one(
    jobs: Jobs,
) -> None:
    """127.0.0.2 is loopback too on Linux, but a listener there is not reached at 127.0.0.1:
    the host given is the one bound. An address this machine lacks is refused with a fix
    that lists the ones it has."""
    worker = Worker(jobs)
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_metrics, worker, 0, "127.0.0.2")
        await worker.presence.beat(publish=False)
        with pytest.raises(OSError):
            await http_get(port)
        status, _, _ = await http_get(port, host="127.0.0.2")
        assert status == 200
        tg.cancel_scope.cancel()
    with pytest.raises(JobsError) as raised:
        await serve_metrics(Worker(jobs), 0, "192.0.2.1")  # TEST-NET-1: no machine's own
    assert raised.value.code == "METRICS_PORT_UNAVAILABLE"
    assert not raised.value.retryable  # no wait makes the address this machine's
    assert raised.value.flag == "--metrics-host"  # type: ignore[attr-defined]
    assert "127.0.0.1" in run_fix(raised.value.fix)
