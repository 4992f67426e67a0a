"""A job row another program wrote, seen by an agent: `list_jobs` answers the rest of the page
with the row named in a STORE_DAMAGED notice whose fix runs; the CLI's list and the dashboard's
show the same notice; a worker runs the jobs beside it and its claim settles the row dead. A
pause whose details another program wrote still shows, and its fix lifts it."""

from __future__ import annotations

import sqlite3

import anyio
import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker
from mcp_jobs.cli.entry import main
from mcp_jobs.config import Settings
from tests.dashboard.support import Marks, browse, dashboard_for
from tests.mcp.conftest import OpenMcp
from tests.sqlite.fix_runner import run_fix
from tests.support.fix_lines import command_words

pytestmark = pytest.mark.drivers("sqlite", reason="another program writes into the file")


async def _three_with_the_middle_damaged(jobs: Jobs, database_url: str) -> list[str]:
    ids = [(await jobs.enqueue("greet", {"user_id": n})).id for n in (1, 2, 3)]
    other = sqlite3.connect(database_url.removeprefix("sqlite:///"))
    other.execute("UPDATE mcp_jobs_jobs SET input = 'not json' WHERE id = ?", (ids[1],))
    other.commit()
    other.close()
    return ids


async def test_list_jobs_names_a_damaged_row_and_answers_the_rest(
    jobs: Jobs, database_url: str, open_mcp: OpenMcp
) -> None:
    first, damaged, third = await _three_with_the_middle_damaged(jobs, database_url)
    async with open_mcp() as mcp:
        listed = await mcp.ok("list_jobs")
        assert [j["id"] for j in listed["jobs"]] == [third, first]
        (notice,) = listed["notices"]
        assert notice["code"] == "STORE_DAMAGED" and notice["job_ids"] == [damaged]
        assert f"job {damaged} cannot be read" in notice["cause"]
        ran = await run_fix(notice["fix"])
        assert ran.returncode == 0 and b"input: 'not json'" in ran.stdout, ran

        # Pages of one walk past it: the page that holds only the damaged row says so.
        page = await mcp.ok("list_jobs", {"limit": 1})
        assert [j["id"] for j in page["jobs"]] == [third] and "notices" not in page
        page = await mcp.ok("list_jobs", {"limit": 1, "cursor": page["next_cursor"]})
        assert page["jobs"] == [] and page["notices"][0]["job_ids"] == [damaged]
        page = await mcp.ok("list_jobs", {"limit": 1, "cursor": page["next_cursor"]})
        assert [j["id"] for j in page["jobs"]] == [first]

        # Reading the row itself stays the typed error, not retried.
        failed = await mcp.fails("inspect_job", {"job_id": damaged}, "STORE_DAMAGED")
        assert failed["retryable"] is False

        # A worker runs the others; the damaged row is dead, its error the damage.
        assert await Worker(jobs).run_until_idle() == 2
        for done in (first, third):
            assert (await mcp.ok("inspect_job", {"job_id": done}))["job"]["state"] == "done"
        dead = await mcp.ok("list_jobs", {"state": "dead"})
        assert dead["jobs"] == [] and dead["notices"][0]["job_ids"] == [damaged]
        ran = await run_fix(notice["fix"])
        assert b"input: 'not json'" in ran.stdout and b"STORE_DAMAGED" in ran.stdout, ran


async def test_the_cli_and_the_dashboard_show_the_damaged_row(
    jobs: Jobs, app: JobRegistry, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first, damaged, third = await _three_with_the_middle_damaged(jobs, database_url)
    code = await anyio.to_thread.run_sync(main, ["jobs", "ls", "--database-url", database_url])
    out = capsys.readouterr().out
    assert code == 0 and first in out and third in out, out
    assert f"CRITICAL STORE_DAMAGED: job {damaged} cannot be read" in out
    # The line as printed runs (with whatever environment the imported apps declared before it).
    (fix,) = [line.removeprefix("  fix: ") for line in out.splitlines() if "  fix: " in line]
    ran = await run_fix(fix)
    assert ran.returncode == 0 and b"input: 'not json'" in ran.stdout, (fix, ran)

    dash = dashboard_for(jobs)
    async with browse(dash) as http:
        page = await http.get("/jobs")
    assert page.status_code == 200
    marks = Marks(page.text)
    assert {m.attrs["data-job-id"] for m in marks.all("job-row")} == {first, third}
    assert marks.one("damaged").attrs["data-job-id"] == damaged


async def test_a_damaged_step_fails_its_job_for_good_and_the_worker_goes_on(
    jobs: Jobs, database_url: str, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    """A stored step's output that is not JSON: the job's replay cannot read it, so the job
    fails for good (STORE_DAMAGED is terminal; retrying would read it again) with a fix that
    prints its steps as stored; inspecting the job answers the same; other jobs run."""
    order = await jobs.enqueue("fulfil", {"order_id": 7})
    await Worker(jobs).run_until_idle()  # reserves, then sleeps 10 s
    other = sqlite3.connect(database_url.removeprefix("sqlite:///"))
    other.execute("UPDATE mcp_jobs_steps SET output = 'not json' WHERE job_id = ?", (order.id,))
    other.commit()
    other.close()
    greeting = await jobs.enqueue("greet", {"user_id": 1})
    clock.advance(10_000)
    await Worker(jobs).run_until_idle()

    async with open_mcp() as mcp:
        assert (await mcp.ok("inspect_job", {"job_id": greeting.id}))["job"]["state"] == "done"
        (job,) = (await mcp.ok("list_jobs", {"name": "fulfil"}))["jobs"]
        assert job["state"] == "failed", job
        error = job["last_error"]
        assert (
            error["code"] == "STORE_DAMAGED" and f"job {order.id}, step 'reserve'" in error["cause"]
        )
        ran = await run_fix(error["fix"])
        assert ran.returncode == 0 and b"reserve: 'not json'" in ran.stdout, ran
        failed = await mcp.fails("inspect_job", {"job_id": order.id}, "STORE_DAMAGED")
        assert failed["fix"] == error["fix"]


async def test_a_pause_another_program_wrote_shows_and_its_fix_lifts_it(
    jobs: Jobs, database_url: str, open_mcp: OpenMcp, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, queue_stats, diagnose_queue and resume_queue failed INTERNAL on such a pause
    while it went on holding the queue: nothing could show it or lift it."""
    await jobs.enqueue("greet", {"user_id": 1})
    await jobs.pause(queue="mail", actor="ops", reason="smtp down")
    other = sqlite3.connect(database_url.removeprefix("sqlite:///"))
    other.execute("UPDATE mcp_jobs_pauses SET paused_at = 'abc' WHERE name = 'mail'")
    other.commit()
    other.close()
    async with open_mcp(Settings(database_url=database_url)) as mcp:
        (mail,) = (await mcp.ok("queue_stats", {"queues": ["mail"]}))["queues"]
        assert mail["ready"] == 1 and mail["paused"] == {"kind": "queue", "name": "mail"}
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "mail"})
        (finding,) = [f for f in diagnosis["findings"] if f["code"] == "QUEUE_PAUSED"]
        assert "mail was paused at a time that cannot be read: its 1 ready" in finding["cause"]
        described = await mcp.ok("describe_jobs", {"name": "greet"})
        assert described["paused"] == [mail["paused"]]

        code = await anyio.to_thread.run_sync(
            main, ["queues", "ls", "--database-url", database_url]
        )
        assert code == 0 and "mail" in capsys.readouterr().out
        fix = command_words(finding["fix"])[1:]
        assert await anyio.to_thread.run_sync(main, fix) == 0
        (mail,) = (await mcp.ok("queue_stats", {"queues": ["mail"]}))["queues"]
        assert "paused" not in mail
    assert len(await jobs.driver.claim("w", 10, 60_000)) == 1


async def test_a_descriptor_another_program_wrote_is_forgotten_by_its_next_call(
    jobs: Jobs, database_url: str, open_mcp: OpenMcp
) -> None:
    """describe_jobs failed with a fix no agent could run (`--app <the module declaring …>`);
    its next_call is now the prune that forgets the row (deleting no history), and describe_jobs
    answers again."""
    done = await jobs.enqueue("greet", {"user_id": 1})
    await Worker(jobs).run_until_idle()
    await Worker(jobs).publish_descriptors()
    other = sqlite3.connect(database_url.removeprefix("sqlite:///"))
    other.execute("UPDATE mcp_jobs_descriptors SET descriptor = '[1]' WHERE name = 'greet'")
    other.commit()
    other.close()
    async with open_mcp() as mcp:
        failed = await mcp.fails("describe_jobs", {}, "DESCRIPTOR_INVALID")
        call = failed["next_call"]
        assert call == {"tool": "prune_history", "arguments": {"write": True}}
        forgot = await mcp.ok(call["tool"], call["arguments"])
        assert forgot["unreadable_descriptor"] == "greet" and forgot["more"] is True
        assert not any(forgot["by_state"].values())
        assert (await jobs.get(done.id)).state == "done"
        described = await mcp.ok("describe_jobs", {})
        assert "greet" in [j["name"] for j in described["jobs"]]
