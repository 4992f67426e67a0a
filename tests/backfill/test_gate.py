"""Each gate refusal fires in its situation and not otherwise, on every driver; a dry run writes
nothing anywhere and reports what a write would answer."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine import Jobs, ManualClock, Worker
from engine.backfill import PASS_JOB, BackfillRegistry, Backfills, service
from engine.errors import JobsError
from engine.fix_lines import as_raised
from engine.ids import new_id
from schemas.jobs import EnqueueRequest
from schemas.states import LIVE_STATES
from tests.backfill.support import Customers


async def _nothing_written(jobs: Jobs) -> None:
    assert (await jobs.list()).jobs == []
    assert await jobs.driver.backfill_runs() == []


async def test_a_dry_run_counts_and_samples_and_writes_nothing_anywhere(
    jobs: Jobs, backfills: Backfills, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    definition = customers.declare(backfill_registry, batch_size=10)
    before = customers.snapshot()

    plan = await backfills.dry_run("normalize_emails")

    assert plan.name == "normalize_emails" and plan.environment == "development"
    assert plan.checksum == definition.checksum
    assert (plan.rows_remaining, plan.batch_size, plan.batches) == (25, 10, 3)
    assert plan.sample_keys == customers.dirty_ids[:10]
    assert plan.would_run is True and plan.blocked_by is None
    assert customers.snapshot() == before and customers.handled == []
    await _nothing_written(jobs)


async def test_an_unknown_name_is_refused_with_the_declared_names(
    jobs: Jobs, backfills: Backfills, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    customers.declare(backfill_registry)
    for call in (backfills.dry_run("normalise_emails"), backfills.write("normalise_emails")):
        with pytest.raises(JobsError) as caught:
            await call
        assert caught.value.code == "BACKFILL_UNKNOWN"
        assert caught.value.details is not None
        assert caught.value.details["known"] == ["normalize_emails"]
        assert caught.value.next_call is not None
        assert caught.value.next_call.tool == "list_backfills"
    await _nothing_written(jobs)
    # Not otherwise: the declared name is planned.
    assert (await backfills.dry_run("normalize_emails")).would_run


async def test_an_environment_the_backfill_does_not_declare_is_refused(
    jobs: Jobs,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    customers.declare(backfill_registry, environments=("staging", "production"))
    development = Backfills(jobs, registry=backfill_registry, environment="development")

    with pytest.raises(JobsError) as caught:
        await development.write("normalize_emails")
    assert caught.value.code == "BACKFILL_ENVIRONMENT"
    # Never the bypass (MCP_JOBS_ENV=staging against this database): a deploy, or the code.
    assert caught.value.fix.startswith("run it in a deploy whose MCP_JOBS_ENV is staging or ")
    plan = await development.dry_run("normalize_emails")
    assert plan.would_run is False and plan.rows_remaining == 25
    assert plan.blocked_by is not None and plan.blocked_by.code == "BACKFILL_ENVIRONMENT"
    assert [s.pending for s in await development.list()] == [False]
    await _nothing_written(jobs)

    # Not otherwise: a declared environment starts the pass.
    production = Backfills(jobs, registry=backfill_registry, environment="production")
    assert (await production.dry_run("normalize_emails")).blocked_by is None
    start = await production.write("normalize_emails")
    monkeypatch.setenv("MCP_JOBS_ENV", "production")  # production's own worker
    await Worker(jobs).run_until_idle()
    assert (await jobs.get(start.job_id)).state == "done"


async def test_a_precondition_that_does_not_hold_refuses_before_reading_anything(
    jobs: Jobs, backfills: Backfills, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    missing: dict[str, str | None] = {"migration": "0007_customers_email_unique"}

    async def requires() -> str | None:
        return missing["migration"]

    customers.declare(backfill_registry, requires=requires, requires_fix="shop migrate --json")

    for call in (backfills.dry_run("normalize_emails"), backfills.write("normalize_emails")):
        with pytest.raises(JobsError) as caught:
            await call
        assert caught.value.code == "BACKFILL_MIGRATION_PENDING"
        assert caught.value.fix == "shop migrate --json"
    assert customers.count_calls == 0 and customers.read_calls == 0
    await _nothing_written(jobs)

    # Not otherwise: once it holds, the pass runs.
    missing["migration"] = None
    assert (await backfills.dry_run("normalize_emails")).would_run
    start = await backfills.write("normalize_emails")
    await Worker(jobs).run_until_idle()
    assert (await jobs.get(start.job_id)).state == "done"


async def test_a_precondition_that_regressed_before_the_pass_ran_fails_the_pass(
    jobs: Jobs, backfills: Backfills, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    missing: dict[str, str | None] = {"migration": None}

    async def requires() -> str | None:
        return missing["migration"]

    customers.declare(backfill_registry, requires=requires)
    start = await backfills.write("normalize_emails")
    missing["migration"] = "0007_customers_email_unique"  # rolled back before a worker ran it
    read_by_write = customers.read_calls  # the write samples what its dry run would

    await Worker(jobs).run_until_idle()

    record = await jobs.get(start.job_id)
    assert record.state == "failed" and record.last_error is not None
    assert record.last_error.code == "BACKFILL_MIGRATION_PENDING"
    assert customers.handled == [] and customers.read_calls == read_by_write
    (run,) = await jobs.driver.backfill_runs("normalize_emails")
    assert run.status == "failed" and run.rows_processed == 0


async def test_a_live_pass_refuses_a_second_write_and_names_the_job_to_inspect(
    jobs: Jobs, backfills: Backfills, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    customers.declare(backfill_registry)
    first = await backfills.write("normalize_emails")

    with pytest.raises(JobsError) as caught:
        await backfills.write("normalize_emails")
    assert caught.value.code == "BACKFILL_RUNNING"
    # The client's database written in (on memory://, the client's own call).
    shown = f"mcp-jobs jobs show {first.job_id} --json"
    assert caught.value.fix == as_raised(jobs.fix_context, shown)
    assert caught.value.next_call is not None
    assert caught.value.next_call.tool == "inspect_job"
    assert caught.value.next_call.arguments == {"job_id": first.job_id}
    # Force does not get past a live pass either.
    with pytest.raises(JobsError) as forced:
        await backfills.write("normalize_emails", force=True)
    assert forced.value.code == "BACKFILL_RUNNING"
    plan = await backfills.dry_run("normalize_emails")
    assert plan.blocked_by is not None and plan.blocked_by.code == "BACKFILL_RUNNING"
    assert len((await jobs.list(name=PASS_JOB)).jobs) == 1
    (state,) = await backfills.list()
    assert state.live_job_id == first.job_id and state.pending

    # Not otherwise: once the pass has finished, the name is applied, not running.
    await Worker(jobs).run_until_idle()
    with pytest.raises(JobsError) as after:
        await backfills.write("normalize_emails")
    assert after.value.code == "BACKFILL_APPLIED"
    (state,) = await backfills.list()
    assert state.live_job_id is None and not state.pending


async def test_a_completed_backfill_is_refused_until_forced(
    jobs: Jobs, backfills: Backfills, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    customers.declare(backfill_registry)
    # Not before it completed: a dry run and a write both go ahead.
    assert (await backfills.dry_run("normalize_emails")).blocked_by is None
    start = await backfills.write("normalize_emails")
    await Worker(jobs).run_until_idle()

    with pytest.raises(JobsError) as caught:
        await backfills.write("normalize_emails")
    assert caught.value.code == "BACKFILL_APPLIED"
    # The forced write's dry run, as the next_call: run as given by a loop retrying a write,
    # the forced write itself swept again what nobody asked for (exploreR).
    rehearsal = "mcp-jobs backfill normalize_emails --force --json"
    assert caught.value.fix == as_raised(jobs.fix_context, rehearsal)
    assert "nothing to do unless it must sweep again" in caught.value.cause
    assert caught.value.details is not None
    assert caught.value.details["run_id"] == start.run_id
    assert caught.value.next_call is not None
    # The forced write is shown only: the call to make is its dry run.
    assert caught.value.next_call.arguments == {"name": "normalize_emails", "force": True}
    plan = await backfills.dry_run("normalize_emails")
    assert plan.would_run is False and plan.rows_remaining == 0
    assert plan.blocked_by is not None and plan.blocked_by.code == "BACKFILL_APPLIED"
    assert (await backfills.dry_run("normalize_emails", force=True)).would_run

    forced = await backfills.write("normalize_emails", force=True)
    assert forced.run_id != start.run_id


async def test_applied_is_per_environment(
    jobs: Jobs,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    customers.declare(backfill_registry)
    staging = Backfills(jobs, registry=backfill_registry, environment="staging")
    production = Backfills(jobs, registry=backfill_registry, environment="production")
    await staging.write("normalize_emails")
    monkeypatch.setenv("MCP_JOBS_ENV", "staging")  # staging's own worker
    await Worker(jobs).run_until_idle()

    with pytest.raises(JobsError) as caught:
        await staging.write("normalize_emails")
    assert caught.value.code == "BACKFILL_APPLIED"
    start = await production.write("normalize_emails")  # a rehearsal does not apply production
    assert start.environment == "production"


@pytest.mark.drivers("sqlite", reason="a row another program wrote into the jobs file")
async def test_a_live_pass_behind_a_page_of_damaged_rows_still_holds_the_name(
    jobs: Jobs,
    backfills: Backfills,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    clock: ManualClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The live-pass read pages past a page that holds only a damaged pass row (the list names
    it in `damaged`), so the backfill's state still shows the pass that runs."""
    customers.declare(backfill_registry)
    started = await backfills.write("normalize_emails")
    newer = new_id()
    await jobs.driver.enqueue(
        [
            EnqueueRequest(
                id=newer,
                run_id=new_id(),
                name=PASS_JOB,
                queue="default",
                idempotency_key="another pass",
                input={},
                run_at=clock.now_ms(),
                max_attempts=1,
            )
        ]
    )
    with sqlite3.connect(tmp_path / "jobs.db") as other:
        other.execute("UPDATE mcp_jobs_jobs SET input = 'not json' WHERE id = ?", (newer,))
    other.close()
    monkeypatch.setattr(service, "LIVE_PASS_PAGE", 1)

    first = await jobs.list(state=LIVE_STATES, name=PASS_JOB, limit=1)
    assert (first.jobs, [d.id for d in first.damaged]) == ([], [newer])
    assert (await backfills.state("normalize_emails")).live_job_id == started.job_id
