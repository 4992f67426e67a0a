"""The sampler: a ring per queue bounded to the last hour whatever runs for how long, queues
that left forgotten, and throughput counted exactly on drivers that count settled jobs by
`finished_at` (a burst shows once, then silence reads zero), estimated on those that do not
(a steady rate reads as that rate, not zero)."""

from __future__ import annotations

import anyio
import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.rules import RECENT_SETTLED_MS
from engine.testing.blocked import wait_all_tasks_blocked
from mcp_jobs.dashboard.sampler import WINDOW_MS, Sampler
from mcp_jobs.operations.models import QueueStatsView
from tests.dashboard.support import dashboard_for, declare

INTERVAL_MS = 10_000


def reading(queue: str, **counts: int) -> QueueStatsView:
    return QueueStatsView(queue=queue, **counts)


def test_memory_stays_bounded_after_many_samples() -> None:
    clock = ManualClock()
    sampler = Sampler(interval_ms=10_000)
    assert sampler.capacity == WINDOW_MS // 10_000
    for i in range(5 * sampler.capacity):  # five hours
        # A new queue every ten minutes, each seen for ten minutes only.
        sampler.record(clock.now_ms(), [reading("steady", ready=i), reading(f"q{i // 60}")])
        clock.advance(10_000)
    assert len(sampler.series("steady")) == sampler.capacity
    assert sampler.size() <= 2 * sampler.capacity
    # Only the queues seen within the last hour keep a ring.
    assert sampler.series("q0") == []
    window = sampler.series("steady")
    assert window[-1].at - window[0].at < WINDOW_MS
    assert window[-1].depth == 5 * sampler.capacity - 1


def test_the_estimate_reads_a_steady_rate_as_that_rate() -> None:
    # The fallback for a driver without exact counts: no `settled` passed to `record`.
    sampler = Sampler(interval_ms=60_000)
    per_min = 30
    done_in_window = per_min * RECENT_SETTLED_MS // 60_000  # the window is full and steady
    at = 0
    for _ in range(5):
        sampler.record(at, [reading("q", done=done_in_window)])
        at += 60_000
    rates = [s.throughput_per_min for s in sampler.series("q")]
    assert rates[0] == 0  # no earlier reading to compare with
    assert rates[1:] == [pytest.approx(per_min)] * 4


def test_the_estimate_reads_a_busy_queues_shorter_window_at_its_rate() -> None:
    # Past the stats' cap, `done` holds the newest rows only, over a window shorter than an
    # hour: a steady 600 a minute over a 100 s window keeps done at 1,000.
    sampler = Sampler(interval_ms=60_000)
    at = 0
    for _ in range(4):
        sampler.record(at, [reading("q", done=1_000, settled_window_ms=100_000)])
        at += 60_000
    rates = [s.throughput_per_min for s in sampler.series("q")]
    assert rates[1:] == [pytest.approx(600)] * 3
    # A window of 0 (every counted row finished at the reading's instant): all of it aged out.
    sampler.record(at, [reading("q", done=1_000, settled_window_ms=0)])
    sampler.record(at + 60_000, [reading("q", done=1_000, settled_window_ms=0)])
    assert sampler.series("q")[-1].throughput_per_min == pytest.approx(1_000)


def test_the_estimate_shows_a_burst_and_a_retry_is_not_negative() -> None:
    sampler = Sampler(interval_ms=60_000)
    sampler.record(0, [reading("q", dead=10, failed=2)])
    sampler.record(60_000, [reading("q", done=120, dead=10, failed=2)])
    sampler.record(120_000, [reading("q", done=120, dead=4, failed=2)])  # six dead retried
    sampler.record(180_000, [reading("q", done=120, dead=7, failed=2)])
    rates = [round(s.throughput_per_min) for s in sampler.series("q")]
    assert rates == [0, 120, 2, 5]  # 120 done; then the window's aged-out estimate (2/min)


async def test_it_samples_on_its_clock_until_cancelled() -> None:
    clock = ManualClock()
    sampler = Sampler(interval_ms=1000)
    reads = 0

    async def read() -> list[QueueStatsView]:
        nonlocal reads
        reads += 1
        if reads == 2:
            raise RuntimeError("database restarting")  # skipped, not fatal
        return [reading("q", ready=reads)]

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler.run, read, clock)
            await wait_all_tasks_blocked()
            while reads < 4:
                clock.advance(1000)
                await wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
    assert [s.depth for s in sampler.series("q")] == [1, 3, 4]


async def _settle_mail(jobs: Jobs, n: int, first: int) -> None:
    """`n` jobs of the `mail` queue run to done now, on the test's clock."""
    for i in range(first, first + n):
        await jobs.enqueue("ok", {"n": i})
    await Worker(jobs, concurrency=4, queues=["mail"]).run_until_idle()


async def test_after_a_burst_silence_reads_zero_throughput(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    declare(registry)
    dash = dashboard_for(jobs)
    sampler = dash.sampler = Sampler(interval_ms=INTERVAL_MS)

    async def sample() -> None:
        await sampler.take(clock.now_ms(), dash.read_queues, dash.count_settled)
        clock.advance(INTERVAL_MS)

    await _settle_mail(jobs, 1, 0)  # a queue to read before the burst, settled a reading ago
    clock.advance(INTERVAL_MS)
    await sample()
    await _settle_mail(jobs, 60, 1)  # at the second reading's instant
    for _ in range(13):  # two minutes of silence after it
        await sample()
    rates = [s.throughput_per_min for s in sampler.series("mail")]
    # Counted at the reading after it (each counts up to SETTLE_LAG_MS before its instant),
    # once. The estimate read ~1/min after it, for an hour: the burst aging out of the window.
    assert rates == [0.0, 0.0, 60 * 60_000 / INTERVAL_MS] + [0.0] * 11


async def test_a_steady_rate_reads_exactly(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    declare(registry)
    dash = dashboard_for(jobs)
    sampler = dash.sampler = Sampler(interval_ms=INTERVAL_MS)
    per_interval = 5
    for i in range(8):
        await sampler.take(clock.now_ms(), dash.read_queues, dash.count_settled)
        await _settle_mail(jobs, per_interval, i * per_interval)
        clock.advance(INTERVAL_MS)
    await sampler.take(clock.now_ms(), dash.read_queues, dash.count_settled)
    rates = [s.throughput_per_min for s in sampler.series("mail")]
    # The queue appears once it holds rows: from the second reading, 30/min at every one.
    assert rates == [per_interval * 60_000 / INTERVAL_MS] * 8
