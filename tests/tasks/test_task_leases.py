"""A scheduler takes and renews its tasks' leases in one round trip where the store can
(`lead_many`: PostgreSQL, SQLite), one at a time elsewhere; either way one holder at a time per
task, an expired lease taken over, a lease of 0 ms handed back."""

from __future__ import annotations

from engine import Jobs, ManualClock
from engine.drivers.base import LEADER_LEASES, ManyLeaderLeases, lead_each, require
from tests.tasks.every_store import any_jobs, kind_of

__all__ = ["any_jobs"]  # the fixture, used by name

LEASE_MS = 30_000


async def test_leases_taken_together_hold_one_holder_per_name(
    any_jobs: Jobs, clock: ManualClock
) -> None:
    leases = require(any_jobs.driver, LEADER_LEASES)
    if kind_of(any_jobs) in ("postgres", "sqlite"):
        assert isinstance(leases, ManyLeaderLeases)
    names = [f"task:t{n}" for n in range(5)]
    assert await lead_each(leases, names[:3], "a", LEASE_MS) == set(names[:3])
    # b gets only the ones a does not hold; a renews its own.
    assert await lead_each(leases, names, "b", LEASE_MS) == set(names[3:])
    assert await lead_each(leases, names, "a", LEASE_MS) == set(names[:3])
    assert await lead_each(leases, [], "a", LEASE_MS) == set()

    clock.advance(LEASE_MS)  # a's leases ran out (a renewed at +0), b's too
    assert await lead_each(leases, names, "b", LEASE_MS) == set(names)
    assert await lead_each(leases, names[:2], "b", 0) == set(names[:2])  # handed back
    assert await lead_each(leases, names, "a", LEASE_MS) == set(names[:2])
