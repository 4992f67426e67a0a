"""The rule PostgreSQL and Redis claims share after an outage (engine/drivers/lease_grace.py):
no expired lease is taken over until one lease after the first claim that succeeds."""

from __future__ import annotations

from engine.drivers.lease_grace import LeaseGrace

LEASE_MS = 30_000


def test_without_an_outage_expired_leases_are_taken_over() -> None:
    grace = LeaseGrace()
    assert grace.take_over(grace.outage_seen, 1_000)


def test_after_an_outage_expired_leases_wait_one_lease_after_the_first_claim() -> None:
    grace = LeaseGrace()
    grace.outage()
    outage = grace.outage_seen
    assert not grace.take_over(outage, 100_000)
    grace.claimed(outage, 100_000, LEASE_MS)
    assert not grace.outage_seen
    assert not grace.take_over(grace.outage_seen, 100_000 + LEASE_MS - 1)
    assert grace.take_over(grace.outage_seen, 100_000 + LEASE_MS)


def test_a_claim_that_failed_leaves_the_outage_seen() -> None:
    grace = LeaseGrace()
    grace.outage()
    # The claim raised: `claimed` never ran, so the next claim is still the first after it.
    assert not grace.take_over(grace.outage_seen, 100_000)
    assert grace.outage_seen


def test_an_outage_seen_during_a_claim_counts_for_the_next() -> None:
    grace = LeaseGrace()
    outage = grace.outage_seen  # read as the claim began: none
    grace.outage()  # another call failed meanwhile
    grace.claimed(outage, 100_000, LEASE_MS)
    assert grace.outage_seen and not grace.take_over(grace.outage_seen, 200_000)
