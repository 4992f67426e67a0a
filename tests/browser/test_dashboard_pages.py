"""Every dashboard page in Chromium, against a live `mcp-jobs dashboard` on a database holding
every state (tests.browser.seeding): the numbers on the page are the engine's own, read through
`mcp_jobs.operations` and the `Jobs` client on the same database."""

from __future__ import annotations

from collections import Counter
from typing import Any

from engine import Jobs
from mcp_jobs.operations import Scope, inspect_job, list_backfills, queue_stats
from mcp_jobs.operations.models import InspectJobResult, QueueStatsResult
from mcp_jobs.operations.workers import live_workers
from mcp_jobs.server.audit import AUDIT_EVENT
from schemas.jobs import JobRecord
from tests.browser.seeding import WORKER_ID, Seeded, beat
from tests.browser.support import on_engine, step_attempts, value
from tests.support.dashboard_process import Dashboard

COUNTS = ("ready", "running", "delayed", "suspended", "dead", "done", "failed", "cancelled")
ACTION_PATHS = ("/retry", "/cancel", "/pause", "/resume")


async def every_job(jobs: Jobs, **filters: Any) -> list[JobRecord]:
    """Every job matching `filters`, newest first, through the engine's own paging."""
    found: list[JobRecord] = []
    cursor: str | None = None
    while True:
        page = await jobs.list(limit=100, cursor=cursor, **filters)
        found += page.jobs
        cursor = page.next_cursor
        if cursor is None:
            return found


def stats(url: str) -> QueueStatsResult:
    return on_engine(url, lambda scope: queue_stats(scope))


def test_the_overview_shows_queue_stats_numbers(
    page: Any, dashboard: Dashboard, seeded: Seeded, shoot: Any
) -> None:
    before = stats(seeded.url)
    assert page.goto(dashboard.base).ok
    rows = [str(r.get_attribute("data-queue")) for r in page.locator("tr[data-queue]").all()]
    # Read before the second engine reading: the overview reloads itself every few seconds.
    shown = {
        (name, field): value(page.get_by_test_id(f"queue:{name}:{field}"))
        for name in rows
        for field in (*COUNTS, "oldest_ready_age_ms")
    }
    sparks = {
        (name, series): page.get_by_test_id(f"spark:{name}:{series}").count()
        for name in rows
        for series in ("depth", "throughput")
    }
    paused = {name for name in rows if page.get_by_test_id(f"paused:{name}").count() == 1}
    shoot("overview")
    after = stats(seeded.url)

    queues = {q.queue: q for q in after.queues or []}
    earlier = {q.queue: q for q in before.queues or []}
    assert {"mail", "orders", "billing", "reports", "imports"} <= set(queues)
    assert sorted(rows) == sorted(queues)
    for name, q in queues.items():
        for field in COUNTS:
            assert shown[name, field] == getattr(q, field) == getattr(earlier[name], field), (
                name,
                field,
            )
        # The age grows while we look: the page's reading falls between the engine's two.
        age = shown[name, "oldest_ready_age_ms"]
        assert earlier[name].oldest_ready_ms <= age <= q.oldest_ready_ms, name
        assert sparks[name, "depth"] == sparks[name, "throughput"] == 1, name
    assert paused == {name for name, q in queues.items() if q.paused is not None} == {"reports"}
    assert (queues["mail"].done, queues["billing"].dead, queues["imports"].running) == (130, 5, 1)


def test_paging_through_the_job_list_reaches_every_job_once(
    page: Any, dashboard: Dashboard, seeded: Seeded
) -> None:
    expected = on_engine(seeded.url, lambda scope: every_job(scope.jobs))
    assert len(expected) > 100  # several pages whatever the page size up to 100

    seen: list[tuple[str | None, str | None]] = []
    assert page.goto(dashboard.at("jobs")).ok
    for _ in range(len(expected)):
        rows = page.get_by_test_id("job-row")
        seen += [
            (r.get_attribute("data-job-id"), r.get_attribute("data-state")) for r in rows.all()
        ]
        following = page.get_by_test_id("next-page")
        if following.count() == 0:
            break
        with page.expect_navigation():
            following.click()
    assert seen == [(j.id, j.state) for j in expected]  # newest first, each once
    assert len({job_id for job_id, _ in seen}) == len(seen)


def test_the_state_filter_lists_what_the_engine_lists(
    page: Any, dashboard: Dashboard, seeded: Seeded
) -> None:
    dead = on_engine(seeded.url, lambda scope: every_job(scope.jobs, state="dead"))
    assert page.goto(dashboard.at("jobs?state=dead")).ok
    rows = page.get_by_test_id("job-row")
    assert [r.get_attribute("data-job-id") for r in rows.all()] == [j.id for j in dead]
    assert {r.get_attribute("data-state") for r in rows.all()} == {"dead"}


def test_the_job_page_shows_a_bar_per_step_attempt_and_the_structured_error(
    page: Any, dashboard: Dashboard, seeded: Seeded, shoot: Any
) -> None:
    inspected: InspectJobResult = on_engine(
        seeded.url, lambda scope: inspect_job(scope, seeded.ship_order)
    )
    assert page.goto(dashboard.at(f"jobs/{seeded.ship_order}")).ok

    job = inspected.job
    assert job is not None and job.last_error is not None
    assert page.get_by_test_id("job-state").inner_text() == job.state == "dead"
    steps = inspected.steps or []
    shown = step_attempts(page.get_by_test_id("step-bar"))
    assert shown == {s.name: (s.attempts, s.status) for s in steps}
    assert shown["charge"] == (2, "completed")  # failed once, retried, completed
    error = job.last_error
    assert page.get_by_test_id("error-code").inner_text() == error.code == "JOB_FAILED"
    text = page.locator("body").inner_text()
    assert error.cause in text and error.fix in text
    assert page.get_by_test_id("event").count() == len(inspected.events or []) > 0
    shoot("job")


def test_dead_letters_are_grouped_by_error_code(
    page: Any, dashboard: Dashboard, seeded: Seeded
) -> None:
    dead = on_engine(seeded.url, lambda scope: every_job(scope.jobs, state="dead"))
    codes = Counter(j.last_error.code for j in dead if j.last_error is not None)
    assert codes == {"JOB_FAILED": 4, "JOB_TIMEOUT": 2}

    assert page.goto(dashboard.at("dead")).ok
    groups = page.locator('[data-testid^="dead:"]')
    shown = {
        str(g.get_attribute("data-testid")).removeprefix("dead:"): value(g) for g in groups.all()
    }
    assert shown == dict(codes)


def test_the_backfills_page_shows_each_backfill_with_its_progress(
    page: Any, dashboard: Dashboard, seeded: Seeded
) -> None:
    listed = on_engine(seeded.url, lambda scope: list_backfills(scope))
    assert page.goto(dashboard.at("backfills")).ok
    assert listed.backfills
    for b in listed.backfills:
        section = page.get_by_test_id(f"backfill:{b.name}")
        assert section.count() == 1, b.name
        assert b.last_run is not None and b.last_run.status == "completed"
        text = section.inner_text()
        assert str(b.last_run.rows_processed) in text and str(b.last_run.rows_total) in text


def test_the_workers_page_shows_every_live_worker(
    page: Any, dashboard: Dashboard, seeded: Seeded
) -> None:
    async def beat_then_read(scope: Scope) -> list[str]:
        await beat(scope.jobs)  # a live worker beats: it stays live however long the run took
        return [w.id for w in await live_workers(scope)]

    live = on_engine(seeded.url, beat_then_read)
    assert WORKER_ID in live
    assert page.goto(dashboard.at("workers")).ok
    for worker_id in live:
        assert page.get_by_test_id(f"worker:{worker_id}").count() == 1, worker_id


def _action_links(page: Any) -> list[str]:
    hrefs = [a.get_attribute("href") or "" for a in page.locator("a[href]").all()]
    return [h for h in hrefs if h.split("?")[0].endswith(ACTION_PATHS)]


def test_a_read_only_dashboard_shows_no_action(
    page: Any, dashboard: Dashboard, seeded: Seeded
) -> None:
    assert dashboard.read_only
    dead_id = seeded.dead[0]
    for where in ("", f"jobs/{seeded.ship_order}", f"jobs/{dead_id}", "dead", "jobs"):
        assert page.goto(dashboard.at(where)).ok, where
        assert _action_links(page) == [], where
        assert page.locator("form[method=post], form[method=POST]").count() == 0, where
    page.goto(dashboard.at(f"jobs/{dead_id}/retry"))
    assert page.get_by_test_id("confirm").count() == 0
    record = on_engine(seeded.url, lambda scope: scope.jobs.get(dead_id))
    assert record.state == "dead"


def test_retry_from_the_page_requeues_the_job_after_a_confirmation(
    page: Any, writable: tuple[Seeded, Dashboard], shoot: Any
) -> None:
    seeded, dashboard = writable
    dead_id = seeded.dead[0]
    assert page.goto(dashboard.at(f"jobs/{dead_id}")).ok
    retry = page.locator(f'a[href$="/jobs/{dead_id}/retry"]')
    assert retry.count() == 1
    with page.expect_navigation():
        retry.click()

    # Asking is not acting: the job is still dead until the form is confirmed.
    state = on_engine(seeded.url, lambda scope: scope.jobs.get(dead_id)).state
    assert state == "dead"
    with page.expect_navigation():
        page.get_by_test_id("confirm").click()
    page.get_by_test_id("flash").wait_for()
    shoot("retried")

    inspected = on_engine(seeded.url, lambda scope: inspect_job(scope, dead_id))
    assert inspected.job is not None and inspected.job.state == "ready"
    assert page.get_by_test_id("job-state").inner_text() == "ready"
    # Audited as the MCP tool's call is, under the dashboard's actor.
    audits = [e for e in inspected.events or [] if e.kind == AUDIT_EVENT]
    assert [(e.actor, (e.data or {}).get("tool")) for e in audits] == [
        ("dashboard:retry_job", "retry_job")
    ]


def test_pause_from_the_overview_stops_the_queue_after_a_confirmation(
    page: Any, writable: tuple[Seeded, Dashboard]
) -> None:
    seeded, dashboard = writable
    assert page.goto(dashboard.base).ok
    with page.expect_navigation():
        page.get_by_test_id("pause:mail").click()
    asked = on_engine(seeded.url, lambda scope: scope.jobs.pauses())
    assert [p.name for p in asked] == ["reports"]  # asking is not acting
    with page.expect_navigation():
        page.get_by_test_id("confirm").click()
    page.get_by_test_id("flash").wait_for()

    paused = on_engine(seeded.url, lambda scope: scope.jobs.pauses())
    assert sorted(p.name for p in paused if p.kind == "queue") == ["mail", "reports"]
    assert page.get_by_test_id("paused:mail").count() == 1


def test_every_page_runs_under_its_content_security_policy(
    page: Any, dashboard: Dashboard, seeded: Seeded
) -> None:
    """The policy that keeps other sites from framing the pages lets their own style, the
    timeline's placed bars and the overview's reload run: Chromium refuses nothing."""
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Security Policy" in m.text else None)
    for where in (f"jobs/{seeded.ship_order}", "jobs", "dead", "backfills", "workers"):
        assert page.goto(dashboard.at(where)).ok, where
    assert page.goto(dashboard.at(f"jobs/{seeded.ship_order}")).ok
    left = page.get_by_test_id("step-bar").last.evaluate("b => getComputedStyle(b).left")
    assert left != "auto"  # its style attribute applied
    assert page.goto(dashboard.base).ok
    with page.expect_navigation(timeout=15_000):
        pass  # the overview's own script reloads it
    assert refused == []
