"""A dashboard list URL whose `cursor` this server did not hand out for those filters (garbage,
or a cursor carried over from another filter by editing the URL) is refused CURSOR_INVALID with
that page's first page for its fix, one click away, as its cause says ("start again from the
first page"); not a CLI line of another face."""

from __future__ import annotations

import re

import pytest

from engine import Jobs
from tests.dashboard.support import Marks, Seeded, browse, dashboard_for

pytestmark = pytest.mark.drivers("memory", reason="the answers do not depend on the driver")


async def _refusal(jobs: Jobs, url: str) -> tuple[int, str, str]:
    async with browse(dashboard_for(jobs)) as http:
        answer = await http.get(url)
    marks = Marks(answer.text)
    return answer.status_code, marks.one("error-code").text, marks.one("error-fix").text


async def test_a_garbage_cursor_is_refused_with_the_first_page_as_its_fix(
    jobs: Jobs, seeded: Seeded
) -> None:
    status, code, fix = await _refusal(jobs, "/jobs?state=dead&cursor=garbage")
    assert (status, code) == (400, "CURSOR_INVALID")
    assert fix == "/jobs?state=dead"
    async with browse(dashboard_for(jobs)) as http:
        assert (await http.get(fix)).status_code == 200  # the fix opens the page


async def test_a_cursor_carried_to_other_filters_is_refused_with_their_first_page(
    jobs: Jobs, seeded: Seeded
) -> None:
    dash = dashboard_for(jobs)
    async with browse(dash) as http:
        first = await http.get("/jobs?queue=orders&limit=1")
        if first.status_code != 200:  # no limit parameter: a page of 50 then
            first = await http.get("/jobs?queue=orders")
    found = re.search(r"cursor=([A-Za-z0-9_.-]+)", first.text)
    cursor = found.group(1) if found else "c1.AAAAAAAAAAAAAAAAAAAAAA"
    status, code, fix = await _refusal(jobs, f"/jobs?queue=mail&cursor={cursor}")
    assert (status, code) == (400, "CURSOR_INVALID")
    assert fix == "/jobs?queue=mail"
