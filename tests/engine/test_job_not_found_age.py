"""JOB_NOT_FOUND of a well-formed id says when the id was made; only an id old enough for
retention to have pruned its job is said to be maybe pruned (an 8-minute-old id of another
tenant's job, on a tenant-pinned server, was)."""

from __future__ import annotations

import time

from engine.errors import JobNotFoundError


def _id_made(ms_ago: int) -> str:
    """An id of engine.ids' shape (48 bits of its epoch ms first) made `ms_ago` before now."""
    return f"{time.time_ns() // 1_000_000 - ms_ago:012x}" + "0" * 19 + "1"


def test_a_young_id_is_not_said_to_be_pruned() -> None:
    cause = JobNotFoundError(_id_made(8 * 60_000), tenant_id="acme").cause
    assert "its id was made at" in cause and "pruned by retention once" not in cause
    assert "too recently for the default retention" in cause
    # An operator's prune is not ruled out: one of --older-than 0d deletes a job settled now.
    assert "db prune --older-than" in cause


def test_an_old_id_may_have_been_pruned() -> None:
    cause = JobNotFoundError(_id_made(30 * 86_400_000)).cause
    assert "it may have been pruned by retention" in cause
