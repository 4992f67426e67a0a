"""Every page shows the engine's own numbers: the overview `queue_stats`, the list `list_jobs`,
the job page `inspect_job`, dead letters the dead jobs' codes; and nothing a job holds is run
as markup."""

from __future__ import annotations

import shlex
from collections import Counter

import pytest

from engine import Jobs
from mcp_jobs.config import Settings
from mcp_jobs.dashboard.html import age
from mcp_jobs.dashboard.pages import jobs as jobs_page
from mcp_jobs.operations import inspect_job, list_jobs, queue_stats
from tests.dashboard.support import XSS, Marks, Seeded, browse, dashboard_for
from tests.support.fix_lines import command_words

pytestmark = pytest.mark.drivers("memory", "sqlite", reason="the pages over two drivers suffice")

FIELDS = {
    "ready": "ready",
    "running": "running",
    "delayed": "delayed",
    "suspended": "suspended",
    "dead": "dead",
    "failed": "failed",
    "done": "done",
    "cancelled": "cancelled",
    "oldest_ready_age_ms": "oldest_ready_ms",
}


async def test_the_overview_shows_queue_stats_for_every_queue(jobs: Jobs, seeded: Seeded) -> None:
    dash = dashboard_for(jobs)
    async with browse(dash) as http:
        page = await http.get("/")
    assert page.status_code == 200
    marks = Marks(page.text)
    stats = (await queue_stats(dash.scope())).queues or []
    assert {m.attrs["data-queue"] for m in marks.found if "data-queue" in m.attrs} == {
        q.queue for q in stats
    }
    for q in stats:
        for field, attr in FIELDS.items():
            cell = marks.one(f"queue:{q.queue}:{field}")
            assert int(cell.attrs["data-value"]) == getattr(q, attr), (q.queue, field)
            if field in ("done", "cancelled"):  # the window they count, in words
                assert cell.attrs["title"] == f"in the last {age(q.settled_window_ms)}"
        marks.one(f"spark:{q.queue}:depth")
        marks.one(f"spark:{q.queue}:throughput")
    # Every state the seed made is counted somewhere on the page.
    assert sum(int(marks.one(f"queue:{q.queue}:dead").attrs["data-value"]) for q in stats) == 2


async def test_the_job_list_is_list_jobs_filtered_and_paged(
    jobs: Jobs, seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    dash = dashboard_for(jobs)
    monkeypatch.setattr(jobs_page, "PAGE_SIZE", 3)
    async with browse(dash) as http:
        first = Marks((await http.get("/jobs")).text)
        expected = await list_jobs(dash.scope(), limit=3)
        rows = first.all("job-row")
        assert [(r.attrs["data-job-id"], r.attrs["data-state"]) for r in rows] == [
            (j.id, j.state) for j in expected.jobs or []
        ]
        following = await http.get(first.one("next-page").attrs["href"])
        second = await list_jobs(dash.scope(), limit=3, cursor=expected.next_cursor)
        assert [r.attrs["data-job-id"] for r in Marks(following.text).all("job-row")] == [
            j.id for j in second.jobs or []
        ]
        dead = Marks((await http.get("/jobs", params={"state": "dead"})).text).all("job-row")
        assert sorted(r.attrs["data-job-id"] for r in dead) == sorted(seeded.ids["dead"])
        assert {r.attrs["data-state"] for r in dead} == {"dead"}
        unknown = await http.get("/jobs", params={"queue": "nope"})
    assert unknown.status_code == 404
    assert Marks(unknown.text).one("error-code").text == "QUEUE_UNKNOWN"


async def test_the_job_page_shows_inspect_job(jobs: Jobs, seeded: Seeded) -> None:
    dash = dashboard_for(jobs)
    for state in ("dead", "done", "suspended", "running"):
        job_id = seeded.one(state)
        async with browse(dash) as http:
            marks = Marks((await http.get(f"/jobs/{job_id}")).text)
        trace = await inspect_job(dash.scope(), job_id)
        assert trace.job is not None
        assert marks.one("job-state").text == trace.job.state == state
        bars = [(b.attrs["data-step"], b.attrs["data-status"]) for b in marks.all("step-bar")]
        assert sorted(bars) == sorted((s.name, s.status) for s in trace.steps or [])
        assert len(marks.all("event")) == len(trace.events or [])
        if trace.job.last_error is not None:
            assert marks.one("error-code").text == trace.job.last_error.code
    async with browse(dash) as http:
        missing = await http.get("/jobs/01NOSUCHJOB")
    assert missing.status_code == 404
    assert Marks(missing.text).one("error-code").text == "JOB_NOT_FOUND"


async def test_the_job_page_shows_the_stored_traceback_of_a_body_s_exception(
    jobs: Jobs, seeded: Seeded
) -> None:
    # The file and line of the raise are what an operator needs from a dead letter; markup in
    # the failure's text stays text.
    dash = dashboard_for(jobs)
    for job_id in seeded.ids["dead"]:
        stored = (await inspect_job(dash.scope(), job_id)).job
        assert stored is not None and stored.last_error is not None
        trace = (stored.last_error.details or {})["traceback"]
        async with browse(dash) as http:
            marks = Marks((await http.get(f"/jobs/{job_id}")).text)
        shown = marks.one("job-traceback").text
        assert shown == trace and "tests/dashboard/support.py" in shown


async def test_a_fix_on_the_job_page_names_the_dashboard_s_database(
    jobs: Jobs, seeded: Seeded
) -> None:
    # Copied from the page and run anywhere, the fix must open this database, not the default.
    url = "sqlite:////srv/shop/jobs.db"
    dash = dashboard_for(jobs, settings=Settings(database_url=url))
    for state in ("dead", "failed"):
        async with browse(dash) as http:
            marks = Marks((await http.get(f"/jobs/{seeded.one(state)}")).text)
        stored = (await inspect_job(dash.scope(), seeded.one(state))).job
        assert stored is not None and stored.last_error is not None
        fix = marks.one("error-fix").text
        assert stored.last_error.fix.split(" --")[0] in fix
        assert f"--database-url {url}" in fix


async def test_dead_letters_are_grouped_by_their_stored_code(jobs: Jobs, seeded: Seeded) -> None:
    dash = dashboard_for(jobs)
    async with browse(dash) as http:
        marks = Marks((await http.get("/dead")).text)
    listed = await list_jobs(dash.scope(), state="dead")
    codes = Counter(j.last_error.code if j.last_error else "NO_ERROR" for j in listed.jobs or [])
    shown = {
        k.removeprefix("dead:"): int(m.attrs["data-value"])
        for k, m in marks.prefixed("dead:").items()
    }
    assert shown == dict(codes) and sum(shown.values()) == 2
    assert int(marks.one("dead-total").attrs["data-value"]) == 2


async def test_a_queue_nothing_knows_is_refused_on_every_page_that_filters_by_one(
    jobs: Jobs, seeded: Seeded
) -> None:
    """QUEUE_UNKNOWN, as `jobs ls --queue` and `queue_stats`: never an empty, healthy page."""
    async with browse(dashboard_for(jobs)) as http:
        for page in ("/dead", "/jobs"):
            answer = await http.get(page, params={"queue": "nope"})
            assert answer.status_code == 404, page
            assert Marks(answer.text).one("error-code").text == "QUEUE_UNKNOWN", page
        # A known queue with no dead job is an empty page all the same.
        assert (await http.get("/dead", params={"queue": "slow"})).status_code == 200


async def test_workers_and_backfills_pages(jobs: Jobs, seeded: Seeded) -> None:
    dash = dashboard_for(jobs)
    async with browse(dash) as http:
        workers = await http.get("/workers")
        backfills = await http.get("/backfills")
    assert list(Marks(workers.text).prefixed("worker:")) == ["worker:w-test"]
    assert "host&lt;b&gt;" in workers.text and "host<b>" not in workers.text
    assert backfills.status_code == 200


async def test_job_data_holding_markup_is_shown_as_text(jobs: Jobs, seeded: Seeded) -> None:
    dash = dashboard_for(jobs)
    async with browse(dash) as http:
        pages = [
            (await http.get(f"/jobs/{seeded.ids['done'][1]}")).text,
            (await http.get(f"/jobs/{seeded.ids['dead'][0]}")).text,
            (await http.get("/dead")).text,
            (await http.get("/jobs", params={"name": XSS})).text,
        ]
    for page in pages:
        assert XSS not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[0]  # the input
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[1]  # the error's cause


async def test_a_refused_value_shows_a_fix_that_runs(jobs: Jobs, seeded: Seeded) -> None:
    """A value with nothing near it: the command listing what the argument names, else the
    help of the command the page shows the same as (each fix was prose before)."""
    dash = dashboard_for(jobs)
    fixes = {}
    async with browse(dash) as http:
        for params, want in (
            ({"queue": "q\x00"}, "mcp-jobs jobs stats --json"),
            ({"name": "x" * 300}, "mcp-jobs jobs describe --json"),
            ({"state": "bogus"}, "mcp-jobs jobs ls --help"),
        ):
            page = await http.get("/jobs", params=params)
            assert page.status_code == 400
            fixes[want] = Marks(page.text).one("error-fix").text
        job_page = await http.get("/jobs/a%00b")
        fixes["mcp-jobs jobs ls --json"] = Marks(job_page.text).one("error-fix").text
    for want, fix in fixes.items():
        assert shlex.join(command_words(fix)).startswith(want), fix
