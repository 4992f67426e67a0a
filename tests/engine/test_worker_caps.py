"""CapRoom: what a worker learned of its caps between claims (engine/worker_caps.py)."""

from __future__ import annotations

from engine import ManualClock
from engine.worker_caps import CONTENDED_CLAIMS, CapRoom
from schemas.jobs import ClaimExclusion

TENANT = [("tenant:big", 2), ("queue:mail", 5)]


def test_its_own_slots_at_a_cap_exclude_that_cap_from_the_claims() -> None:
    room = CapRoom(ManualClock(), hint_ms=500)
    assert room.exclusion() is None
    assert room.reserve("j1", TENANT) is None
    assert room.exclusion() is None  # 1 of 2
    assert room.reserve("j2", TENANT) is None
    assert room.exclusion() == ClaimExclusion(tenants=frozenset({"big"}))
    # A third job of big is shed without asking the database.
    assert room.reserve("j3", TENANT) == "tenant:big"
    room.released("j1")
    assert room.exclusion() is None
    assert room.claim_limit(16) == 1  # one freed: no batch of big's jobs to shed again


def test_a_cap_whose_jobs_lead_the_line_limits_claims_to_its_room_while_they_do() -> None:
    room = CapRoom(ManualClock(), hint_ms=500)
    caps = [("queue:capped", 3)]
    for n in range(3):
        assert room.reserve(f"j{n}", caps) is None
    assert room.reserve("over", caps) == "queue:capped"  # its jobs lead: contended
    room.released("j0")
    assert room.claim_limit(16) == 1
    assert room.reserve("j3", caps) is None  # one of its jobs came: still leading
    room.released("j1")
    assert [room.claim_limit(16) for _ in range(CONTENDED_CLAIMS + 1)] == [
        *[1] * CONTENDED_CLAIMS,
        16,  # none of its jobs came in that many claims: no longer limits
    ]


def test_a_refusal_holds_the_cap_out_for_the_hint_then_asks_again() -> None:
    clock = ManualClock()
    room = CapRoom(clock, hint_ms=500)
    assert room.reserve("j1", [("job:sync", 1)]) is None
    room.refused("j1", "job:sync", room.asking())
    assert room.exclusion() == ClaimExclusion(names=frozenset({"sync"}))
    assert room.reserve("j2", [("job:sync", 1)]) == "job:sync"
    clock.advance(500)
    assert room.exclusion() is None
    assert room.reserve("j2", [("job:sync", 1)]) is None


def test_a_refusal_that_crossed_a_release_here_is_not_kept() -> None:
    # The slot it was refused for may be the one this worker let go meanwhile: no hint, and the
    # claims are woken as for a lift, so the job does not wait out the hint for nothing.
    room = CapRoom(ManualClock(), hint_ms=500)
    assert room.reserve("held", [("queue:q", 1)]) is None
    room.claim_limit(4)
    mark = room.asking()
    room.released("held")
    room.claim_limit(4)
    assert not room.wake_due()
    assert room.reserve("next", [("queue:q", 1)]) is None
    room.refused("next", "queue:q", mark)
    assert room.exclusion() is None and room.wake_due()


def test_a_full_global_cap_claims_nothing() -> None:
    room = CapRoom(ManualClock(), hint_ms=500)
    assert room.reserve("j1", [("global", 1)]) is None
    assert room.claim_limit(8) == 0
    room.released("j1")
    assert room.claim_limit(8) == 1
    assert room.wake_due() is False  # the claim just made accounts for the lift


def test_a_job_that_held_nothing_releases_nothing() -> None:
    room = CapRoom(ManualClock(), hint_ms=500)
    room.released("never-reserved")
    assert room.claim_limit(3) == 3 and room.exclusion() is None


def test_a_refusal_frees_nothing_and_its_cap_is_probed_one_job_at_a_time() -> None:
    # Held elsewhere: the refused job's own reservation was no slot, so nothing is lifted; once
    # the hint runs out, a claim asks for one job to try the cap again, not a batch to shed.
    clock = ManualClock()
    room = CapRoom(clock, hint_ms=500)
    room.claim_limit(8)
    assert room.reserve("j1", [("tenant:big", 2), ("queue:q", 9)]) is None
    room.refused("j1", "tenant:big", room.asking())
    assert not room.wake_due()
    assert room.claim_limit(8) == 8  # big is left out of the claim meanwhile
    assert room.exclusion() == ClaimExclusion(tenants=frozenset({"big"}))
    clock.advance(500)
    assert room.exclusion() is None
    assert room.claim_limit(8) == 1
