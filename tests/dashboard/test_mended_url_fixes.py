"""A value slipped into a dashboard URL that plainly stands for another (an id with a space or a
word around it, `state=Dead`, a queue or job name one key off) is refused with the page as
meant for its fix, one click away, as the CLI mends the same slips into the command as meant;
not with a listing or a `--help` line to start over from."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from engine import Jobs
from tests.dashboard.support import Marks, Seeded, browse, dashboard_for

pytestmark = pytest.mark.drivers("memory", reason="the answers do not depend on the driver")


async def _fix_of(jobs: Jobs, url: str) -> tuple[int, str, str]:
    async with browse(dashboard_for(jobs)) as http:
        answer = await http.get(url)
    marks = Marks(answer.text)
    return answer.status_code, marks.one("error-code").text, marks.one("error-fix").text


@pytest.mark.parametrize("typed", ["{id} ", " {id}", "job {id}", "{ID}"])
async def test_a_job_id_held_in_the_path_is_mended_to_its_page(
    jobs: Jobs, seeded: Seeded, typed: str
) -> None:
    job_id = seeded.one("dead")
    slipped = typed.format(id=job_id, ID=job_id.upper())
    status, code, fix = await _fix_of(jobs, "/jobs/" + quote(slipped, safe=""))
    assert (status, code) == (404, "JOB_NOT_FOUND")
    assert fix == f"/jobs/{job_id}"


async def test_an_id_cut_short_keeps_the_listing_as_its_fix(jobs: Jobs, seeded: Seeded) -> None:
    status, code, fix = await _fix_of(jobs, "/jobs/" + seeded.one("dead")[:12])
    assert (status, code) == (404, "JOB_NOT_FOUND")
    assert "jobs ls" in fix  # no single id to mend to: what there is to name


@pytest.mark.parametrize(
    ("query", "meant"),
    [
        ("state=Dead&queue=orders", "state=dead&queue=orders"),
        ("state=%20failed", "state=failed"),
        ("queue=order&state=dead", "queue=orders&state=dead"),
        ("name=bom", "name=boom"),
    ],
)
async def test_a_filter_value_that_stands_for_another_is_mended_to_the_page(
    jobs: Jobs, seeded: Seeded, query: str, meant: str
) -> None:
    status, code, fix = await _fix_of(jobs, f"/jobs?{query}")
    assert status in (400, 404) and code in ("INVALID_ARGUMENT", "QUEUE_UNKNOWN", "JOB_UNKNOWN")
    assert fix == f"/jobs?{meant}"
    async with browse(dashboard_for(jobs)) as http:
        assert (await http.get(fix)).status_code == 200  # the fix opens the page


async def test_the_overview_of_a_queue_one_key_off_is_mended(jobs: Jobs, seeded: Seeded) -> None:
    status, code, fix = await _fix_of(jobs, "/?queue=order")
    assert (status, code) == (404, "QUEUE_UNKNOWN")
    assert fix == "/?queue=orders"


async def test_a_value_near_nothing_keeps_its_listing_fix(jobs: Jobs, seeded: Seeded) -> None:
    status, code, fix = await _fix_of(jobs, "/jobs?state=zzzz")
    assert (status, code) == (400, "INVALID_ARGUMENT")
    assert "jobs ls" in fix


async def test_a_mounted_dashboard_mends_under_its_prefix(jobs: Jobs, seeded: Seeded) -> None:
    dash = dashboard_for(jobs)
    dash.prefix = "/dashboard"
    job_id = seeded.one("dead")
    async with browse(dash) as http:
        answer = await http.get(f"/dashboard/jobs/{quote(job_id + ' ', safe='')}")
        shown = await http.get("/dashboard/jobs?state=DEAD")
    assert Marks(answer.text).one("error-fix").text == f"/dashboard/jobs/{job_id}"
    assert Marks(shown.text).one("error-fix").text == "/dashboard/jobs?state=dead"
