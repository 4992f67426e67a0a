"""Tool calls while PostgreSQL is away answer within their bound: `wait_for_job` asked for 3 s
answers DRIVER_UNAVAILABLE (retryable) after 3 s, not after the read's whole retry deadline
(10 s), and `cancel_job`, whose server-clock measure and audit read each retried for a whole
deadline (20 s), retries for one deadline in all (engine/call_retries.py).

The server really stops (`pg_ctl stop`, as in tests/postgres/test_outage.py). The jobs' clock
and the retry clock are one `ManualClock` that the test moves while the call runs: the time a
call took is read on it, and no test waits for time.
"""

from __future__ import annotations

import pytest

from engine import JobRegistry, ManualClock
from engine.client import Jobs
from engine.clock import REMEASURE_MS, ServerClock
from engine.drivers.postgres import PostgresDriver
from tests.mcp.support import Answer, Caller, declare_app, serve
from tests.postgres.test_outage import _server_up_after, server_stopped
from tests.postgres.waiting import pumped

__all__ = ["_server_up_after"]  # autouse: however a test here ends, the next finds the server up

RETRY_DEADLINE_MS = 10_000  # the driver's default
STEP_MS = 50
# The pump moves the clock a step every 20 ms of real time, also while the call does real work
# between its last pause and its answer: on a loaded machine a few steps pass there (10,100 ms
# was seen for a 10,000 ms deadline). Far below what each bound replaced (20 s, 10 s).
SLACK_MS = 10 * STEP_MS


async def _timed(clock: ManualClock, mcp: Caller, tool: str, arguments: dict[str, object]) -> int:
    """Call `tool` with the clock moved on until it answers; answer how long it took on it,
    once the answer is checked to be the typed, retryable DB-unavailable error."""
    began = clock.now_ms()
    answer: Answer = await pumped(clock, lambda: mcp.call(tool, arguments), STEP_MS)
    assert answer.code == "DRIVER_UNAVAILABLE", answer.data
    assert answer.data["error"]["retryable"] is True
    return clock.now_ms() - began


@pytest.mark.slow
async def test_a_bounded_wait_answers_within_its_bound_while_the_server_is_away(
    pg_url: str, clock: ManualClock, registry: JobRegistry
) -> None:
    declare_app(registry)
    driver = PostgresDriver(pg_url, clock=clock, retry_clock=clock, listen=False)
    jobs = Jobs(driver, registry=registry, clock=clock)
    try:
        async with serve(jobs, "legacy") as mcp:
            made = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 1}})
            async with server_stopped():
                wait = {"job_id": made["job_id"], "timeout_seconds": 3}
                took = await _timed(clock, mcp, "wait_for_job", wait)
                # Before: 10 s, the read's retry deadline, whatever the wait asked for.
                assert took <= 3_000 + SLACK_MS, took
                took = await _timed(clock, mcp, "wait_for_job", {**wait, "timeout_seconds": 0})
                assert took <= SLACK_MS, took
    finally:
        await jobs.close()


@pytest.mark.slow
async def test_a_cancel_retries_for_one_deadline_in_all_while_the_server_is_away(
    pg_url: str, clock: ManualClock, registry: JobRegistry
) -> None:
    declare_app(registry)
    # Read as the server's clock is, as a real server's is: a cancel measures it again when the
    # last measure is a minute old, and that read retries too.
    server = ServerClock(clock, "postgres")
    driver = PostgresDriver(pg_url, clock=server, retry_clock=clock, listen=False)
    jobs = Jobs(driver, registry=registry, clock=server)
    try:
        async with serve(jobs, "legacy") as mcp:
            made = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 1}})
            async with server_stopped():
                clock.advance(REMEASURE_MS)  # an idle server: its clock is measured again
                took = await _timed(clock, mcp, "cancel_job", {"job_id": made["job_id"]})
                # Before: 20 s, the measure's whole deadline and then the audit read's.
                assert RETRY_DEADLINE_MS <= took <= RETRY_DEADLINE_MS + SLACK_MS, took
            # The server back, a call retries in full again: the next cancel acts.
            done = await pumped(clock, lambda: mcp.ok("cancel_job", {"job_id": made["job_id"]}))
            assert done["job"]["state"] == "cancelled"
    finally:
        await jobs.close()
