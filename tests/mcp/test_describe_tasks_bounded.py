"""`describe_jobs` stays bounded however many cron tasks there are: jobs and tasks page together
by name (`limit`, `next_cursor`), each task lists a few next occurrences and the start of its
description, and paging to the end names every job and task once."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, job
from engine.paging import parse_names_cursor
from engine.tasks import task
from tests.mcp.support import serve

TASKS = 300
LONG = "x" * 16_000  # a description near its 16 KiB bound


class At(BaseModel):
    at: int


def declare(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: str(i.at), queue="reports", registry=registry)
    async def report(input: At, ctx: JobContext) -> None:
        pass

    for n in range(TASKS):
        task(
            name=f"report-{n:04d}",
            cron="*/5 * * * *",
            tz="Europe/Paris",
            enqueue=lambda at: [(report, {"at": at})],
            description=LONG,
            registry=registry,
        )


@pytest.mark.drivers("memory", "sqlite", reason="a bound on the answer, not on a store")
@pytest.mark.parametrize("mode", ["auto"])
async def test_describe_jobs_pages_the_tasks_with_the_jobs(
    jobs: Jobs, registry: JobRegistry, mode: str
) -> None:
    declare(registry)
    async with serve(jobs, mode) as mcp:
        one = (await mcp.call("describe_jobs", {"limit": 1})).data
        assert len(one.get("jobs") or []) + len(one.get("tasks") or []) == 1
        assert parse_names_cursor(one["next_cursor"]) == "report"  # the job sorts first

        first = (await mcp.call("describe_jobs", {})).data
        assert len(json.dumps(first)) < 60_000
        for view in first["tasks"]:
            assert len(view["next_occurrences"]) <= 3
            assert len(view["description"]) <= 300

        names: list[str] = []
        cursor = None
        for _ in range(TASKS):
            arguments = {"limit": 200} if cursor is None else {"limit": 200, "cursor": cursor}
            page = (await mcp.call("describe_jobs", arguments)).data
            names += [d["name"] for d in page.get("jobs") or []]
            names += [t["name"] for t in page.get("tasks") or []]
            cursor = page.get("next_cursor")
            if cursor is None:
                break
        assert names == ["report", *(f"report-{n:04d}" for n in range(TASKS))]

        # Described by its name, a task shows its whole description and more occurrences.
        named = (await mcp.call("describe_jobs", {"name": "report-0007"})).data
        (view,) = named["tasks"]
        assert view["description"] == LONG and len(view["next_occurrences"]) == 5
