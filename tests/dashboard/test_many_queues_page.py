"""The overview stays a small page at any number of queues: the busiest queues' rows, a row of
totals over all, the diagnosis cut as diagnose_queue cuts it, and a filter to one queue."""

from __future__ import annotations

import pytest

from engine import JobRegistry, Jobs
from tests.dashboard.support import Marks, browse, dashboard_for
from tests.mcp.test_many_queues import QUEUES, declare_many, fill_dead

pytestmark = pytest.mark.drivers("memory", "sqlite", reason="memory is fast; one SQL driver")


async def test_the_overview_lists_the_busiest_queues_and_filters_to_one(
    jobs: Jobs, registry: JobRegistry
) -> None:
    declare_many(registry)
    await fill_dead(jobs)
    dash = dashboard_for(jobs)
    async with browse(dash) as http:
        page = await http.get("/")
        assert page.status_code == 200
        assert len(page.text) < 120_000, len(page.text)
        marks = Marks(page.text)
        rows = [m.attrs["data-queue"] for m in marks.found if "data-queue" in m.attrs]
        assert len(rows) == 50 and "q-big" in rows
        assert marks.one("totals:dead").attrs["data-value"] == str(QUEUES + 3)
        assert f"{QUEUES + 1 - 50} more queue" in marks.one("queues-left-out").text
        assert len(marks.all("finding:DEAD_LETTERS")) == 50
        marks.one("finding:MORE_FINDINGS")

        one = Marks((await http.get("/", params={"queue": "q077"})).text)
        rows = [m.attrs["data-queue"] for m in one.found if "data-queue" in m.attrs]
        assert rows == ["q077"]
        assert len(one.all("finding:DEAD_LETTERS")) == 1
        unknown = await http.get("/", params={"queue": "nope"})
        assert unknown.status_code == 404
        typo = await http.get("/", params={"queeu": "q077"})
        assert typo.status_code == 400
