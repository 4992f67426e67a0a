"""The claim-ahead arithmetic: free slots, the room a claim may ask for, and the pace that
sizes how many jobs wait for a slot."""

from __future__ import annotations

from engine.claim_plan import BODY_MS_WEIGHT, PREFETCH_HORIZON_MS, ClaimPlanner


def test_an_idle_worker_has_every_slot_free_and_may_claim_its_concurrency() -> None:
    plan = ClaimPlanner(concurrency=4, prefetch=8, paced=True)
    assert plan.free_slots(bodies=0, held=0, waiting=0) == 4
    assert plan.claim_room(bodies=0, held=0, waiting=0, claiming=0) == 4  # one claim ≤ concurrency


def test_settle_writes_on_their_way_bound_the_free_slots() -> None:
    plan = ClaimPlanner(concurrency=2, prefetch=0)
    # Two bodies over, their acks still committing: both slots free, as many writes as slots.
    assert plan.free_slots(bodies=0, held=2, waiting=0) == 2
    # Four writes outstanding for two slots: no slot until one commits.
    assert plan.free_slots(bodies=0, held=4, waiting=0) == 0
    assert plan.free_slots(bodies=1, held=4, waiting=0) == 0


def test_claim_room_counts_the_jobs_waiting_and_the_claims_on_their_way() -> None:
    plan = ClaimPlanner(concurrency=4, prefetch=8, paced=True)
    # Four bodies run: room for the eight that may wait.
    assert plan.claim_room(bodies=4, held=4, waiting=0, claiming=0) == 4
    assert plan.claim_room(bodies=4, held=10, waiting=6, claiming=0) == 2
    assert plan.claim_room(bodies=4, held=10, waiting=6, claiming=2) == 0


def test_without_a_known_pace_nothing_is_claimed_ahead() -> None:
    """A worker that has not timed a body yet does not know whether its jobs run for a
    millisecond or a minute: it claims for its free slots only."""
    plan = ClaimPlanner(concurrency=4, prefetch=8)
    assert plan.prefetch_now() == 0
    assert plan.claim_room(bodies=4, held=4, waiting=0, claiming=0) == 0
    assert plan.claim_room(bodies=1, held=1, waiting=0, claiming=0) == 3


def test_once_a_body_was_timed_at_no_time_the_whole_prefetch_may_wait() -> None:
    plan = ClaimPlanner(concurrency=4, prefetch=8)
    plan.body_finished(0)
    assert plan.prefetch_now() == 8


def test_long_bodies_are_not_claimed_ahead() -> None:
    plan = ClaimPlanner(concurrency=4, prefetch=8, body_ms=1_000, paced=True)
    assert plan.prefetch_now() == 0
    assert plan.claim_room(bodies=4, held=4, waiting=0, claiming=0) == 0


def test_short_bodies_claim_ahead_what_starts_within_the_horizon() -> None:
    plan = ClaimPlanner(concurrency=4, prefetch=100, body_ms=PREFETCH_HORIZON_MS / 2, paced=True)
    assert plan.prefetch_now() == 8  # each slot starts two bodies within the horizon
    capped = ClaimPlanner(concurrency=4, prefetch=3, body_ms=1, paced=True)
    assert capped.prefetch_now() == 3


def test_the_pace_is_a_running_mean_of_body_durations_from_the_first_one() -> None:
    plan = ClaimPlanner(concurrency=1, prefetch=1)
    plan.body_finished(4_000)
    assert plan.body_ms == 4_000  # a first long body says so at once: not 400 ms
    plan.body_finished(100)
    assert plan.body_ms == 4_000 + (100 - 4_000) * BODY_MS_WEIGHT


def test_a_first_long_body_stops_the_claim_ahead_at_once() -> None:
    plan = ClaimPlanner(concurrency=8, prefetch=16)
    plan.body_finished(4_000)
    assert plan.prefetch_now() == 0


def test_a_claim_ahead_asks_for_at_least_a_quarter_of_the_slots() -> None:
    assert ClaimPlanner(concurrency=16, prefetch=0).claim_batch == 4
    assert ClaimPlanner(concurrency=2, prefetch=0).claim_batch == 1
