"""The page's actions: none on a read-only dashboard; each a confirmation form then a POST with
its CSRF token; a bad token changes nothing; a retry from the page leaves the audit event the
`retry_job` tool leaves."""

from __future__ import annotations

import html
import re

import httpx2
import pytest

from engine import JobContext, JobRegistry, Jobs, job
from mcp_jobs.config import Settings
from mcp_jobs.server.audit import AUDIT_EVENT
from tests.dashboard.support import Marks, Note, Seeded, browse, dashboard_for
from tests.mcp.support import serve

pytestmark = pytest.mark.drivers("memory", "sqlite", reason="the actions over two drivers suffice")


def action_of(form_page: str) -> str:
    found = re.search(r'<form method="post" action="([^"]*)"', form_page)
    assert found is not None, "no confirmation form"
    return html.unescape(found.group(1))


def csrf_of(form_page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', form_page)
    assert found is not None, "the confirmation form carries no CSRF token"
    return found.group(1)


async def test_a_read_only_dashboard_has_no_action_and_shows_none(
    jobs: Jobs, seeded: Seeded
) -> None:
    dead = seeded.one("dead")
    async with browse(dashboard_for(jobs, read_only=True)) as http:
        for route in (f"/jobs/{dead}/retry", f"/jobs/{dead}/cancel", "/queues/pause?queue=mail"):
            assert (await http.post(route, data={"csrf": "x"})).status_code in (403, 405)
            assert (await http.get(route)).status_code in (403, 405)
        pages = [
            (await http.get(p)).text for p in ("/", f"/jobs/{dead}", f"/jobs/{seeded.one('ready')}")
        ]
    for page in pages:
        marks = Marks(page)
        assert not marks.all("confirm") and not marks.all("retry") and not marks.all("cancel")
        assert not marks.prefixed("pause:") and '<form method="post"' not in page
    assert (await jobs.get(dead)).state == "dead"


@pytest.mark.parametrize(
    "token", [None, "", "0" * 64, "wrong"], ids=["missing", "empty", "forged", "short"]
)
async def test_an_action_without_its_csrf_token_is_refused_and_changes_nothing(
    jobs: Jobs, seeded: Seeded, token: str | None
) -> None:
    dead, live = seeded.one("dead"), seeded.one("ready")
    async with browse(dashboard_for(jobs)) as http:
        form = {} if token is None else {"csrf": token}
        assert (await http.post(f"/jobs/{dead}/retry", data=form)).status_code == 403
        assert (await http.post(f"/jobs/{live}/cancel", data=form)).status_code == 403
        assert (await http.post("/queues/pause?queue=mail", data=form)).status_code == 403
        # A token for another path does not carry over.
        other = csrf_of((await http.get(f"/jobs/{live}/cancel")).text)
        assert (await http.post(f"/jobs/{dead}/retry", data={"csrf": other})).status_code == 403
    assert (await jobs.get(dead)).state == "dead"
    assert (await jobs.get(live)).state == "ready"
    assert await jobs.pauses() == []
    trace = await jobs.trace(dead)
    assert [e for e in trace.events if e.kind == AUDIT_EVENT] == []


async def test_confirmed_actions_act_and_flash(jobs: Jobs, seeded: Seeded) -> None:
    dead, live = seeded.one("dead"), seeded.one("ready")
    async with browse(dashboard_for(jobs)) as http:
        job_page = Marks((await http.get(f"/jobs/{dead}")).text)
        form = await http.get(job_page.one("retry").attrs["href"])
        assert Marks(form.text).one("confirm").attrs["type"] == "submit"
        done = await http.post(f"/jobs/{dead}/retry", data={"csrf": csrf_of(form.text)})
        assert done.status_code == 303 and done.headers["location"] == f"/jobs/{dead}?flash=retry"
        shown = Marks((await http.get(done.headers["location"])).text)
        assert shown.one("flash").text.startswith("Retried")
        assert shown.one("job-state").text == "ready"

        form = await http.get(f"/jobs/{live}/cancel")
        done = await http.post(f"/jobs/{live}/cancel", data={"csrf": csrf_of(form.text)})
        assert done.status_code == 303
        pause = Marks((await http.get("/")).text).one("pause:mail").attrs["href"]
        form = await http.get(pause)
        paused = await http.post(
            action_of(form.text), data={"csrf": csrf_of(form.text), "reason": "<b>deploy</b>"}
        )
        assert paused.status_code == 303
        overview = await http.get(paused.headers["location"])
        marks = Marks(overview.text)
        assert marks.one("paused:mail").text.strip() == "paused (<b>deploy</b>)"  # shown as text
        assert marks.one("flash").text.startswith("Paused")
        # A refused action shows the tool's typed error: this job is live now.
        form = await http.get(f"/jobs/{dead}/retry")
        again = await http.post(f"/jobs/{dead}/retry", data={"csrf": csrf_of(form.text)})
        assert again.status_code == 409
        assert Marks(again.text).one("error-code").text == "JOB_NOT_RETRYABLE"
    assert (await jobs.get(dead)).state == "ready"
    assert (await jobs.get(live)).state == "cancelled"
    assert [p.name for p in await jobs.pauses()] == ["mail"]


async def test_a_delayed_job_is_run_now_from_its_page(jobs: Jobs, seeded: Seeded) -> None:
    delayed = seeded.one("delayed")
    async with browse(dashboard_for(jobs)) as http:
        link = Marks((await http.get(f"/jobs/{delayed}")).text).one("retry")
        assert link.text == "run now" and link.attrs["href"] == f"/jobs/{delayed}/retry"
        form = await http.get(link.attrs["href"])
        done = await http.post(link.attrs["href"], data={"csrf": csrf_of(form.text)})
        assert done.status_code == 303
        shown = Marks((await http.get(done.headers["location"])).text)
        assert shown.one("job-state").text == "ready" and not shown.all("retry")
    record = await jobs.get(delayed)
    assert (record.state, record.run_at) == ("ready", jobs.clock.now_ms())


async def test_a_retry_from_the_page_is_audited_as_the_retry_job_tool_is(
    jobs: Jobs, seeded: Seeded
) -> None:
    by_page, by_tool = seeded.ids["dead"]
    async with browse(dashboard_for(jobs)) as http:
        form = await http.get(f"/jobs/{by_page}/retry")
        assert (
            await http.post(f"/jobs/{by_page}/retry", data={"csrf": csrf_of(form.text)})
        ).status_code == 303
    async with serve(jobs, "legacy") as mcp:
        await mcp.ok("retry_job", {"job_id": by_tool})

    async def audit(job_id: str) -> tuple[object, ...]:
        events = (await jobs.trace(job_id)).events
        (call,) = [e for e in events if e.kind == AUDIT_EVENT]
        (requeued,) = [e for e in events if e.kind == "requeued"]
        assert call.data is not None
        data = {**call.data, "arguments": {**call.data["arguments"], "job_id": "J"}}
        return (call.at, call.tenant_id, data, call.actor, requeued.actor, requeued.data)

    page, tool = await audit(by_page), await audit(by_tool)
    # The same event, the same data; the actor says which face acted.
    assert page[:3] == tool[:3] and page[5] == tool[5]
    assert (page[3], page[4]) == ("dashboard:retry_job", "dashboard:retry_job")
    assert (tool[3], tool[4]) == ("mcp:retry_job", "mcp:retry_job")


# Valid queue names a path segment cannot carry: `/`, dot segments, quotes, `?`, `#`, `%`.
ODD_QUEUES = ["mail/bulk", "..", ".", 'q"uote\\back', "очередь-🚀", "a?b&c=d#e", "%2F"]


async def _confirm(http: httpx2.AsyncClient, link: str, **form: str) -> httpx2.Response:
    asked = await http.get(link)
    assert asked.status_code == 200, asked.text
    return await http.post(action_of(asked.text), data={"csrf": csrf_of(asked.text), **form})


async def test_every_queue_name_is_paused_and_resumed_from_the_overview(
    jobs: Jobs, registry: JobRegistry
) -> None:
    for n, queue in enumerate(ODD_QUEUES):

        @job(name=f"odd{n}", queue=queue, idempotency_key=lambda i: str(i.n), registry=registry)
        async def odd(input: Note, ctx: JobContext) -> None:
            return None

        await jobs.enqueue(f"odd{n}", {"n": n})
    async with browse(dashboard_for(jobs)) as http:
        for queue in ODD_QUEUES:
            overview = Marks((await http.get("/")).text)
            paused = await _confirm(http, overview.one(f"pause:{queue}").attrs["href"])
            assert paused.status_code == 303, (queue, paused.text)
            assert [p.name for p in await jobs.pauses()] == [queue]
            overview = Marks((await http.get("/")).text)
            resumed = await _confirm(http, overview.one(f"resume:{queue}").attrs["href"])
            assert resumed.status_code == 303, (queue, resumed.text)
            assert await jobs.pauses() == []


async def test_pausing_a_queue_nothing_uses_shows_the_operations_warning(
    jobs: Jobs, seeded: Seeded
) -> None:
    async with browse(dashboard_for(jobs)) as http:
        done = await _confirm(http, "/queues/pause?queue=nonexistent")
    assert done.status_code == 200
    marks = Marks(done.text)
    assert marks.one("flash").text.startswith("Paused")
    notice = marks.one("notice:QUEUE_UNKNOWN")
    assert "nonexistent" in notice.text
    assert "queues resume nonexistent" in marks.one("notice-fix").text
    assert [p.name for p in await jobs.pauses()] == ["nonexistent"]


async def test_a_tenant_pinned_dashboard_offers_no_pause_or_resume(
    jobs: Jobs, seeded: Seeded
) -> None:
    """A pause holds every tenant's work, so a pinned scope is refused it
    (TENANT_SCOPE_EXCEEDED): no link leads there. The pause itself is shown, as
    `list_pauses` shows it under a pin: it is why this tenant's work waits."""
    await jobs.pause(queue="mail", actor="ops", reason="deploy")
    dash = dashboard_for(jobs, settings=Settings(tenant="acme"))
    async with browse(dash) as http:
        overview = await http.get("/")
        job_page = await http.get(f"/jobs/{seeded.one('dead')}")
    marks = Marks(overview.text)
    assert overview.status_code == 200
    assert not marks.prefixed("pause:") and not marks.prefixed("resume:")
    assert marks.one("paused:mail").text.strip() == "paused (deploy)"
    assert job_page.status_code == 404  # another tenant's job, as before
