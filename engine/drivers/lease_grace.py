"""After an outage, expired leases are spared one lease longer (README, "Outages and broken
connections"): the workers that held them live through the outage, reach the server again, write
the settles they held and heartbeat. A claim that took those leases over at once would run again
bodies that had finished. Drivers that claim in one place (PostgreSQL, Redis, SQLite) call this;
on SQLite the outage is a write lock another connection held past a whole busy timeout.
"""

from __future__ import annotations


class LeaseGrace:
    """What a claiming process keeps between its claims: whether it saw the server go away since
    its last claim that succeeded, and from when (the jobs' clock) it may take over expired
    leases again."""

    __slots__ = ("_take_over_from", "outage_seen")

    def __init__(self) -> None:
        self.outage_seen = False
        self._take_over_from = 0

    def outage(self) -> None:
        """The server was away (or refused every write): spare the leases that ran out."""
        self.outage_seen = True

    def take_over(self, outage: bool, now_ms: int) -> bool:
        """Whether a claim at `now_ms` that began with `outage` (`outage_seen` as it read it)
        may take over expired leases."""
        return not outage and now_ms >= self._take_over_from

    def claimed(self, outage: bool, now_ms: int, lease_ms: int) -> None:
        """A claim that began with `outage` succeeded at `now_ms`: after an outage, no expired
        lease is taken over until one lease after it."""
        if outage:
            self.outage_seen = False
            self._take_over_from = now_ms + lease_ms


__all__ = ["LeaseGrace"]
