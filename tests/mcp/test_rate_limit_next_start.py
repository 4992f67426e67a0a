"""A rate limit's next start is the earliest start it will allow: the slot of the first job that
reserved its turn, not the end of every reservation (`reserved_until`, shown beside it). An
operator told "3 minutes" while the next reserved job starts within one is misled."""

from __future__ import annotations

from engine import Jobs, ManualClock
from engine.drivers.base import RATES, require
from engine.rate_limits import RateTake
from mcp_jobs.cli.rate_limits import _listed
from mcp_jobs.config import Settings
from mcp_jobs.operations.rate_limits import list_rate_limits
from mcp_jobs.operations.scope import Scope
from tests.mcp.conftest import OpenMcp
from tests.support.presence import beat

MINUTE = 60_000


async def test_the_next_start_is_the_first_reserved_slot_not_the_end_of_all_reservations(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await jobs.enqueue("greet", {"user_id": 1})
    await jobs.enqueue("greet", {"user_id": 2})
    await beat(jobs)
    now = clock.now_ms()
    store = require(jobs.driver, RATES)
    take = [RateTake("queue:mail", 1, MINUTE, 1)]
    # One start now, then two jobs shed: each reserves its turn, a minute apart.
    assert (await store.take_rates(take, now, "job-1")).blocked_key is None
    assert (await store.take_rates(take, now, "job-2")).next_start_at == now + MINUTE
    assert (await store.take_rates(take, now, "job-3")).next_start_at == now + 2 * MINUTE

    async with open_mcp() as mcp:
        (mail,) = (await mcp.ok("queue_stats", {"queues": ["mail"]}))["queues"]
        (limit,) = mail["rate_limits"]
        assert limit["next_start_at"] == now + MINUTE
        assert limit["reserved_until"] == now + 3 * MINUTE
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "mail"})
        (finding,) = [f for f in diagnosis["findings"] if f["code"] == "RATE_LIMITED"]
        assert "(in 60 s)" in finding["cause"]

    scope = Scope(jobs, Settings(), "limits", "test", face="cli")
    listed = (await list_rate_limits(scope)).model_dump(mode="json")
    (row,) = listed["rate_limits"]
    assert (row["next_start_at"], row["reserved_until"]) == (now + MINUTE, now + 3 * MINUTE)
    text = _listed(listed)
    assert "next start" in text and "reserved until" in text

    # The first reserved job started (its reservation used): the next start is the second's.
    clock.advance(MINUTE)
    assert (await store.take_rates(take, clock.now_ms(), "job-2")).blocked_key is None
    (row,) = (await list_rate_limits(scope)).rate_limits or []
    assert (row.next_start_at, row.reserved_until) == (now + 2 * MINUTE, now + 3 * MINUTE)


async def test_without_reservations_the_next_start_is_the_keys_own(
    jobs: Jobs, clock: ManualClock
) -> None:
    now = clock.now_ms()
    store = require(jobs.driver, RATES)
    await store.take_rates([RateTake("queue:mail", 1, MINUTE, 1)], now)
    (row,) = (
        await list_rate_limits(Scope(jobs, Settings(), "limits", "test", face="cli"))
    ).rate_limits or []
    assert (row.next_start_at, row.reserved_until) == (now + MINUTE, None)
