"""JOB_NOT_FOUND for a well-formed id says when the id was made and that a job settled longer
ago than its retention is pruned: a job an agent enqueued and can no longer find was most
likely pruned, not mistyped. An id that is malformed, or made before 2001, is just not found."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, ManualClock, Worker, connect, ids, job
from engine.errors import JobNotFoundError
from engine.ids import new_ids
from engine.instants import iso
from engine.pruner import prune_all
from engine.retention import Retention, plan, policy_from_env

NOW = 1_796_131_200_000  # 2026-12-01T13:20:00.000Z


def made_at(job_id: str) -> str:
    """When `job_id` was made: its first 48 bits."""
    return iso(int(job_id[:12], 16))


@pytest.fixture(autouse=True)
def ids_from_scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    # Ids only grow within a process: after another test's clock set past this machine's, they
    # would carry that instant, which JOB_NOT_FOUND rightly reads as made by no job yet.
    monkeypatch.setattr(ids, "_stamp", 0)


class Note(BaseModel):
    n: int


def test_a_well_formed_id_names_when_it_was_made_and_retention() -> None:
    (made,) = new_ids(1, NOW)
    error = JobNotFoundError(made, "acme")
    assert made_at(made) in error.cause and "retention" in error.cause
    assert "in tenant acme" in error.cause
    assert error.fix == "mcp-jobs jobs ls --json"  # the fix and next_call are unchanged


@pytest.mark.parametrize("job_id", ["0" * 32, "nope", "01a2" * 4, "F" * 32])
def test_an_id_no_job_was_made_with_is_just_not_found(job_id: str) -> None:
    assert "retention" not in JobNotFoundError(job_id).cause


async def test_a_pruned_job_is_told_apart_from_a_mistyped_one() -> None:
    registry = JobRegistry()

    @job(registry=registry, idempotency_key=lambda i: f"note:{i.n}")
    async def note(i: Note, ctx: JobContext) -> None: ...

    clock = ManualClock(NOW)
    jobs = await connect("memory://", clock=clock, registry=registry, migrate=True)
    try:
        made = await jobs.enqueue(note, Note(n=1))
        await Worker(jobs, prune=False, retention=Retention(done=0)).run_until_idle()
        clock.advance(1)
        await prune_all(jobs, plan(policy_from_env(environ={}), clock.now_ms(), older_than_ms=0))
        with pytest.raises(JobNotFoundError) as gone:
            await jobs.get(made.id)
        assert made_at(made.id) in gone.value.cause and "retention" in gone.value.cause
    finally:
        await jobs.close()
