"""PARKED_UNKNOWN_NAME names exactly the jobs a worker parked because it did not know their name
and no live worker publishes it. A server or CLI without `--app` knows the jobs by what workers
published: a job that sleeps or waits for an event is suspended, not parked for its name."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

import engine.client
from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, connect, job
from engine.descriptors import STALE_AFTER_MS
from mcp_jobs.cli import main
from tests.mcp.support import serve

APP = "plant.jobs"


class Order(BaseModel):
    order_id: int


def _declare_plant(registry: JobRegistry) -> None:
    """A job that sleeps and one that waits for an event, both in queue `plant`."""

    @job(idempotency_key=lambda i: f"cure:{i.order_id}", queue="plant", registry=registry)
    async def cure(input: Order, ctx: JobContext) -> None:
        await ctx.step.sleep("cure", 3600)

    @job(idempotency_key=lambda i: f"sign:{i.order_id}", queue="plant", registry=registry)
    async def await_signoff(input: Order, ctx: JobContext) -> None:
        await ctx.step.wait_for_event("order.signed", match=str(input.order_id), timeout=3600)


def _declare_ghost(registry: JobRegistry) -> None:
    """A job only its producer declares: no worker runs or publishes it."""

    @job(idempotency_key=lambda i: f"ghost:{i.order_id}", queue="plant", registry=registry)
    async def ghost(input: Order, ctx: JobContext) -> None:
        return None


async def _plant_worker(jobs: Jobs, clock: ManualClock) -> tuple[Jobs, Worker]:
    """The plant's worker on `jobs`' database: it publishes its descriptors as `APP`."""
    plant = JobRegistry()
    _declare_plant(plant)
    theirs = Jobs(jobs.driver, registry=plant, clock=clock)
    worker = Worker(theirs, queues=["plant"], apps=[APP])
    await worker.publish_descriptors()
    return theirs, worker


def _parked(diagnosis: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in diagnosis["findings"] if f["code"] == "PARKED_UNKNOWN_NAME"]


async def test_a_server_without_the_app_does_not_call_sleeps_and_event_waits_parked(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, mode: str
) -> None:
    assert len(registry) == 0  # the server's own registry: no app imported
    plant, worker = await _plant_worker(jobs, clock)
    sleeping = await plant.enqueue("cure", {"order_id": 1})
    waiting = await plant.enqueue("await_signoff", {"order_id": 1})
    assert await worker.run_until_idle() == 2
    assert {(await jobs.get(r.id)).state for r in (sleeping, waiting)} == {"suspended"}

    async with serve(jobs, mode) as mcp:
        diagnosis = await mcp.ok("diagnose_queue")
        assert _parked(diagnosis) == [] and diagnosis["healthy"] is True
        clock.advance(STALE_AFTER_MS + 1)  # the worker is gone: the jobs still only sleep/wait
        later = await mcp.ok("diagnose_queue", {"queue": "plant"})
        assert _parked(later) == [] and later["healthy"] is True


async def test_a_job_a_worker_parked_for_its_unknown_name_is_still_reported(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, mode: str
) -> None:
    plant, worker = await _plant_worker(jobs, clock)
    producer = JobRegistry()
    _declare_ghost(producer)
    ghost = await Jobs(jobs.driver, registry=producer, clock=clock).enqueue(
        "ghost", {"order_id": 2}
    )
    sleeping = await plant.enqueue("cure", {"order_id": 2})
    assert await worker.run_until_idle() == 2  # the ghost parks, the cure sleeps
    assert (await jobs.get(ghost.id)).last_error is not None

    async with serve(jobs, mode) as mcp:
        diagnosis = await mcp.ok("diagnose_queue")
    (parked,) = _parked(diagnosis)
    assert parked["job_ids"] == [ghost.id] and sleeping.id not in parked["job_ids"]
    assert parked["severity"] == "critical" and '"ghost"' in parked["cause"]
    assert f"--app {APP}" in parked["fix"]  # the worker line names the published app


async def test_a_job_parked_once_then_run_by_a_worker_that_knows_it_is_not_parked_when_it_sleeps(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, mode: str
) -> None:
    """A sleep keeps the row's last error: the JOB_UNKNOWN of an earlier park is no park now
    that a live worker publishes the name and ran the job."""
    plant, worker = await _plant_worker(jobs, clock)
    made = await plant.enqueue("cure", {"order_id": 3})
    clock.advance(STALE_AFTER_MS + 1)  # the plant's worker is not live then
    stranger = Worker(Jobs(jobs.driver, registry=JobRegistry(), clock=clock), queues=["plant"])
    assert await stranger.run_until_idle() == 1  # a worker without the module parks it
    parked_once = await jobs.get(made.id)
    assert parked_once.last_error is not None and parked_once.last_error.code == "JOB_UNKNOWN"
    clock.advance(parked_once.run_at - clock.now_ms())
    await worker.publish_descriptors()
    assert await worker.run_until_idle() == 1  # the plant's worker runs it: it sleeps
    assert (await jobs.get(made.id)).state == "suspended"

    async with serve(jobs, mode) as mcp:
        assert _parked(await mcp.ok("diagnose_queue")) == []


@pytest.mark.drivers("sqlite", reason="the CLI process reads the database the worker wrote")
def test_the_cli_without_app_does_not_call_a_sleep_parked(
    database_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("MCP_JOBS_APP", "MCP_JOBS_DATABASE_URL", "MCP_JOBS_TENANT"):
        monkeypatch.delenv(name, raising=False)
    # The CLI without --app knows only the process's default registry: one an earlier test's
    # import filled (the shop's nightly task) would be diagnosed as a task no worker schedules.
    monkeypatch.setattr(engine.client, "default_registry", JobRegistry())

    async def run_plant() -> None:
        plant = JobRegistry()
        _declare_plant(plant)
        theirs = await connect(database_url, registry=plant)
        try:
            await theirs.enqueue("cure", {"order_id": 4})
            await theirs.enqueue("await_signoff", {"order_id": 4})
            worker = Worker(theirs, queues=["plant"], apps=[APP])
            await worker.publish_descriptors()
            assert await worker.run_until_idle() == 2
        finally:
            await theirs.close()

    anyio.run(run_plant)
    code = main(["jobs", "diagnose", "--json", "--database-url", database_url])
    out, _ = capsys.readouterr()
    diagnosis = json.loads(out)
    assert code == 0 and _parked(diagnosis) == [], diagnosis
    assert diagnosis["healthy"] is True, diagnosis["findings"]
