"""The read tools over a real client session: each success and each error it can return."""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.driver_errors import DriverUnavailableError
from engine.instants import iso
from engine.testing.blocked import wait_all_tasks_blocked
from mcp_jobs.config import ServerLimits, Settings
from mcp_jobs.errors import example_call
from schemas.jobs import EnqueueResult
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import HEALED, serve


async def test_describe_jobs_lists_every_job_or_one_by_name(open_mcp: OpenMcp) -> None:
    async with open_mcp() as mcp:
        described = await mcp.ok("describe_jobs")
        names = [d["name"] for d in described["jobs"]]
        assert names == ["flaky", "fulfil", "greet", "receipt"]
        assert described["tasks"] == []  # this app declares no cron task
        one = await mcp.ok("describe_jobs", {"name": "greet"})
        assert "tasks" not in one
        (greet,) = one["jobs"]
        assert greet["queue"] == "mail" and greet["idempotent"] is True
        assert greet["input_schema"]["properties"]["user_id"]["type"] == "integer"
        (receipt,) = (await mcp.ok("describe_jobs", {"name": "receipt"}))["jobs"]
        assert receipt["tenant_required"] is True
        (flaky,) = (await mcp.ok("describe_jobs", {"name": "flaky"}))["jobs"]
        assert flaky["retry"]["delays_ms"] == [1000]
        error = await mcp.fails("describe_jobs", {"name": "nope"}, "JOB_UNKNOWN")
        assert error["details"]["known"] == names
        assert error["next_call"] == {"tool": "describe_jobs", "arguments": {}}


async def test_a_name_that_plainly_stands_for_a_known_one_is_mended_in_the_fix(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """JOB_UNKNOWN and QUEUE_UNKNOWN had the list of names as their fix, the name meant in
    plain view. The same name in another spelling, on a read-only tool, is the fix and the
    next call; a slip of the keys, or a write, is the fix only."""
    made = await jobs.enqueue("greet", {"user_id": 1})
    async with open_mcp() as mcp:
        for tool, given, call, code in [
            ("list_jobs", {"name": "Greet"}, {"name": "greet"}, "JOB_UNKNOWN"),
            ("describe_jobs", {"name": "GREET"}, {"name": "greet"}, "JOB_UNKNOWN"),
            ("list_jobs", {"queue": "Mail"}, {"queue": "mail"}, "QUEUE_UNKNOWN"),
            ("queue_stats", {"queues": ["Mail"]}, {"queues": ["mail"]}, "QUEUE_UNKNOWN"),
        ]:
            error = await mcp.fails(tool, given, code)
            assert error["fix"] == f"{tool} {example_call(call)}", error
            assert error["next_call"] == {"tool": tool, "arguments": call}, error
            await mcp.ok(tool, call)  # the fix runs as given
        slipped = await mcp.fails("list_jobs", {"name": "greeet"}, "JOB_UNKNOWN")
        assert slipped["fix"] == 'list_jobs {"name": "greet"}' and "next_call" not in slipped
        write = {"name": "Greet", "input": {"user_id": 2}}
        error = await mcp.fails("enqueue_job", write, "JOB_UNKNOWN")
        assert error["fix"] == f"enqueue_job {example_call({**write, 'name': 'greet'})}", error
        assert "next_call" not in error, error
    assert [j.id for j in (await jobs.list()).jobs] == [made.id]  # nothing was enqueued


async def test_list_jobs_filters_and_pages(jobs: Jobs, open_mcp: OpenMcp) -> None:
    for user in range(1, 6):
        await jobs.enqueue("greet", {"user_id": user})
    order = await jobs.enqueue("fulfil", {"order_id": 7})
    await jobs.enqueue("receipt", {"order_id": 7}, tenant_id="acme")
    await jobs.cancel(order.id)
    async with open_mcp() as mcp:
        everything = await mcp.ok("list_jobs")
        assert len(everything["jobs"]) == 7 and "next_cursor" not in everything
        assert "input" not in everything["jobs"][0]  # summaries, not payloads
        first = await mcp.ok("list_jobs", {"name": "greet", "limit": 2})
        assert len(first["jobs"]) == 2 and first["next_cursor"]
        seen = [j["id"] for j in first["jobs"]]
        cursor = first["next_cursor"]
        while cursor:
            page = await mcp.ok("list_jobs", {"name": "greet", "limit": 2, "cursor": cursor})
            seen += [j["id"] for j in page["jobs"]]
            cursor = page.get("next_cursor")
        assert len(seen) == len(set(seen)) == 5
        cancelled = await mcp.ok("list_jobs", {"state": "cancelled"})
        assert [j["id"] for j in cancelled["jobs"]] == [order.id]
        live = await mcp.ok("list_jobs", {"state": ["ready", "cancelled"], "queue": "orders"})
        assert [j["id"] for j in live["jobs"]] == [order.id]
        acme = await mcp.ok("list_jobs", {"tenant_id": "acme"})
        assert [j["name"] for j in acme["jobs"]] == ["receipt"]

        error = await mcp.fails("list_jobs", {"limit": 0}, "INVALID_ARGUMENT")
        assert error["details"]["argument"] == "limit"
        error = await mcp.fails("list_jobs", {"limit": 201}, "LIMIT_EXCEEDED")
        assert error["details"] == {"argument": "limit", "value": 201, "limit": 200, "unit": "rows"}


async def test_a_page_size_over_the_cap_beside_a_cursor_keeps_the_cursor(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """The mended call keeps the cursor (the CLI's fix dropped it); a cursor of other filters
    is refused in the same answer, its fix the first page (test_cursor_first). Each next_call
    runs as given."""
    for user in range(1, 6):
        await jobs.enqueue("greet", {"user_id": user})
    async with open_mcp() as mcp:
        first = await mcp.ok("list_jobs", {"limit": 2})
        cursor = first["next_cursor"]
        rest = await mcp.ok("list_jobs", {"limit": 3, "cursor": cursor})
        over = await mcp.fails("list_jobs", {"cursor": cursor, "limit": 500}, "LIMIT_EXCEEDED")
        call = over["next_call"]
        assert call["arguments"] == {"cursor": cursor, "limit": 200}, over
        assert (await mcp.ok(call["tool"], call["arguments"]))["jobs"] == rest["jobs"]
        other = {"cursor": cursor, "limit": 500, "state": "dead"}
        refused = await mcp.fails("list_jobs", other, "CURSOR_INVALID")
        assert refused["next_call"]["arguments"] == {"state": "dead", "limit": 200}, refused
        assert (await mcp.ok("list_jobs", refused["next_call"]["arguments"]))["jobs"] == []


async def test_inspect_job_shows_steps_events_and_when_it_runs_next(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    r = await jobs.enqueue("fulfil", {"order_id": 1})
    worker = Worker(jobs)
    await worker.run_until_idle()  # runs "reserve", then parks on the 10 s sleep
    async with open_mcp() as mcp:
        parked = await mcp.ok("inspect_job", {"job_id": r.id})
        assert parked["job"]["state"] == "suspended"
        assert [(s["name"], s["status"]) for s in parked["steps"]] == [
            ("reserve", "completed"),
            ("settle", "sleeping"),
        ]
        assert parked["next_attempt_at"] == clock.now_ms() + 10_000
        assert parked["retry_delays_ms"] == [1000, 2000] and parked["registered"] is True
        assert "lease" not in parked

        clock.advance(10_000)
        await worker.run_until_idle()
        done = await mcp.ok("inspect_job", {"job_id": r.id})
        assert done["job"]["state"] == "done"
        assert done["job"]["output"] == {"reserved": {"order": 1}, "tracking": "TRK1"}
        assert [s["name"] for s in done["steps"]] == ["reserve", "settle", "ship"]
        assert "parked" in [e["kind"] for e in done["events"]]
        assert "next_attempt_at" not in done

        error = await mcp.fails("inspect_job", {"job_id": "0" * 32}, "JOB_NOT_FOUND")
        assert error["next_call"]["tool"] == "list_jobs"
        assert error["cause"] == f"no job {'0' * 32}"
        # An id cut short or recased, as an agent copies one, is said to be no id at all.
        error = await mcp.fails("inspect_job", {"job_id": r.id[:8]}, "JOB_NOT_FOUND")
        assert (
            "32 lower-case hex digits, whole" in error["cause"]
            and "is 8 characters" in error["cause"]
        )
        error = await mcp.fails("inspect_job", {"job_id": r.id.upper()}, "JOB_NOT_FOUND")
        assert "not all lower-case hex" in error["cause"]
        # Text that holds one id (recased, spaced, quoted, after a word): the call with that
        # id is the fix and the next call, and it runs.
        for held in [r.id.upper(), f" {r.id} ", f'"{r.id}"', f"job {r.id}", f"{r.id}\n"]:
            error = await mcp.fails("inspect_job", {"job_id": held}, "JOB_NOT_FOUND")
            assert error["cause"].endswith(f"; the id it holds is {r.id})"), error
            call = {"tool": "inspect_job", "arguments": {"job_id": r.id}}
            assert error["next_call"] == call, error
            assert error["fix"] == f'inspect_job {{"job_id": "{r.id}"}}', error
            assert (await mcp.ok("inspect_job", call["arguments"]))["job"]["id"] == r.id
        # An id run into more digits is no id held: the list is the fix.
        error = await mcp.fails("inspect_job", {"job_id": f"{r.id}0"}, "JOB_NOT_FOUND")
        assert error["next_call"]["tool"] == "list_jobs", error


async def test_inspect_job_shows_a_lease_and_when_it_expired(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    r = await jobs.enqueue("greet", {"user_id": 1})
    (claimed,) = await jobs.driver.claim("w-1", 1, 5_000)
    async with open_mcp() as mcp:
        held = await mcp.ok("inspect_job", {"job_id": r.id})
        assert held["lease"] == {
            "worker_id": "w-1",
            "expires_at": claimed.lease_expires_at,
            "expired": False,
            "expires_at_iso": iso(claimed.lease_expires_at),
        }
        clock.advance(5_000)
        lapsed = await mcp.ok("inspect_job", {"job_id": r.id})
        assert lapsed["lease"]["expired"] is True


async def test_queue_stats_counts_per_queue(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await jobs.enqueue("greet", {"user_id": 1})
    await jobs.enqueue("greet", {"user_id": 2}, delay=60)
    await jobs.enqueue("fulfil", {"order_id": 1})
    clock.advance(3_000)
    async with open_mcp() as mcp:
        stats = await mcp.ok("queue_stats")
        by_queue = {q["queue"]: q for q in stats["queues"]}
        assert by_queue["mail"]["ready"] == 1 and by_queue["mail"]["delayed"] == 1
        assert by_queue["mail"]["oldest_ready_ms"] == 3_000
        assert by_queue["orders"]["ready"] == 1
        assert "tenant_id" not in stats
        only = await mcp.ok("queue_stats", {"queues": ["orders"]})
        assert [q["queue"] for q in only["queues"]] == ["orders"]


async def test_queue_stats_answers_a_failed_read_as_its_own_error(
    jobs: Jobs, open_mcp: OpenMcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counts, pauses and rate limits are read at once; a refused read comes back as its
    own typed error (not a group of them) once the others have ended."""
    ended: list[str] = []
    describe = jobs.describe

    async def slow_describe() -> Any:
        await anyio.lowlevel.checkpoint()
        found = await describe()
        ended.append("describe")
        return found

    async def down(*args: object, **kwargs: object) -> Any:
        raise DriverUnavailableError("postgres", "connection refused")

    monkeypatch.setattr(jobs, "describe", slow_describe)
    monkeypatch.setattr(jobs, "stats", down)
    async with open_mcp() as mcp:
        error = await mcp.fails("queue_stats", {}, "DRIVER_UNAVAILABLE")
        assert "connection refused" in error["cause"]
    assert ended == ["describe"]


async def test_wait_for_job_returns_once_settled_with_progress(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    r = await jobs.enqueue("fulfil", {"order_id": 3})
    worker = Worker(jobs)
    await worker.run_until_idle()  # parks on the sleep
    assert (await jobs.get(r.id)).state == "suspended"
    progress: list[tuple[float, float | None, str | None]] = []
    first_report = anyio.Event()

    async def on_progress(progress_: float, total: float | None, message: str | None) -> None:
        progress.append((progress_, total, message))
        first_report.set()

    async with open_mcp() as mcp:
        answer: dict[str, object] = {}

        async def wait() -> None:
            answer.update(
                await mcp.ok(
                    "wait_for_job",
                    {"job_id": r.id, "timeout_seconds": 30},
                    progress_callback=on_progress,
                )
            )

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await first_report.wait()  # the waiter has seen the job suspended
                while not answer:
                    clock.advance(1_000)  # wakes the poll and, at 10 s, the sleeping step
                    await worker.run_until_idle()
                    await wait_all_tasks_blocked()
        assert answer["settled"] is True and answer["output"] is not None
        job = answer["job"]
        assert isinstance(job, dict) and job["state"] == "done"
        assert progress, "a caller that asked for progress got none"
        # The job reports no numbers: no total is invented, and the last one says it is done.
        assert all(total is None for _, total, _ in progress), progress
        assert progress[-1][2] == "done", progress
        assert [p[0] for p in progress] == sorted(p[0] for p in progress)
        assert any("suspended" in (m or "") for _, _, m in progress)


async def test_wait_for_job_gives_up_at_the_timeout_without_an_error(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    r = await jobs.enqueue("greet", {"user_id": 1})
    async with open_mcp() as mcp:
        answer: dict[str, object] = {}

        async def wait() -> None:
            answer.update(await mcp.ok("wait_for_job", {"job_id": r.id, "timeout_seconds": 2}))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                while not answer:
                    await wait_all_tasks_blocked()
                    clock.advance(200)
        # At least the timeout: the clock only moves forward, and the tool saw it pass.
        waited = answer["waited_ms"]
        assert answer["settled"] is False and isinstance(waited, int) and waited >= 2_000
        assert "output" not in answer


async def test_wait_for_job_errors(jobs: Jobs, open_mcp: OpenMcp) -> None:
    r = await jobs.enqueue("greet", {"user_id": 1})
    async with open_mcp() as mcp:
        error = await mcp.fails(
            "wait_for_job", {"job_id": r.id, "timeout_seconds": 51}, "LIMIT_EXCEEDED"
        )
        at_cap = {"job_id": r.id, "timeout_seconds": 50}
        assert error["next_call"] == {"tool": "wait_for_job", "arguments": at_cap}
        assert error["fix"] == f"wait_for_job {json.dumps(at_cap, separators=(', ', ': '))}"
        await mcp.fails("wait_for_job", {"job_id": r.id, "timeout_seconds": -1}, "INVALID_ARGUMENT")
        await mcp.fails("wait_for_job", {"job_id": "f" * 32, "timeout_seconds": 0}, "JOB_NOT_FOUND")
        now = await mcp.ok("wait_for_job", {"job_id": r.id, "timeout_seconds": 0})
        assert now["settled"] is False and now["job"]["state"] == "ready"


async def test_diagnose_reports_no_workers_old_backlog_and_expired_leases(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        quiet = await mcp.ok("diagnose_queue")
        assert quiet["healthy"] is True and quiet["findings"] == []

        await jobs.enqueue("greet", {"user_id": 1})
        await jobs.enqueue("greet", {"user_id": 2})
        await jobs.driver.claim("w-dead", 1, 1_000)
        clock.advance(120_000)
        found = await mcp.ok("diagnose_queue")
        codes = {f["code"]: f for f in found["findings"]}
        assert set(codes) == {"NO_LIVE_WORKERS", "LEASES_EXPIRED", "BACKLOG_OLD"}
        assert found["healthy"] is False and found["live_workers"] == 0
        assert found["findings"][0]["code"] == "NO_LIVE_WORKERS"  # critical first
        assert codes["LEASES_EXPIRED"]["queue"] == "mail"
        assert "mcp-jobs worker" in codes["BACKLOG_OLD"]["fix"]
        for finding in found["findings"]:
            assert finding["cause"] and finding["fix"]

        other = await mcp.ok("diagnose_queue", {"queue": "orders"})
        assert other["findings"] == []


async def _dead_flaky(jobs: Jobs, clock: ManualClock) -> tuple[EnqueueResult, Worker]:
    """A `flaky` job run until it is dead (both attempts fail), and the worker that ran it."""
    r = await jobs.enqueue("flaky", {"key": "k"})
    worker = Worker(jobs)
    await worker.run_until_idle()
    clock.advance(1_000)
    await worker.run_until_idle()
    assert (await jobs.get(r.id)).state == "dead"
    return r, worker


async def test_diagnose_finds_dead_letters_with_the_call_to_inspect_them(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    r, worker = await _dead_flaky(jobs, clock)
    async with open_mcp() as mcp:
        found = await mcp.ok("diagnose_queue")
        (dead,) = [f for f in found["findings"] if f["code"] == "DEAD_LETTERS"]
        assert dead["job_ids"] == [r.id] and dead["queue"] == "catalog"
        assert dead["next_call"] == {"tool": "inspect_job", "arguments": {"job_id": r.id}}
        assert "upstream down for k" in dead["cause"]
        # Written to run as given: the context flags follow (FixContext).
        assert f"mcp-jobs jobs show {r.id} --json --database-url " in dead["fix"]
        HEALED.add("k")
        await mcp.ok("retry_job", {"job_id": r.id})
        await worker.run_until_idle()
        after = await mcp.ok("diagnose_queue")
        assert "DEAD_LETTERS" not in {f["code"] for f in after["findings"]}


async def test_diagnose_names_jobs_waiting_out_a_retry_and_the_call_that_runs_them_now(
    jobs: Jobs, app: JobRegistry, mode: str
) -> None:
    first = await jobs.enqueue("flaky", {"key": "w1"})
    second = await jobs.enqueue("flaky", {"key": "w2"})
    await jobs.enqueue("greet", {"user_id": 1}, delay=3600)  # delayed, and never failed
    worker = Worker(jobs)
    assert await worker.run_until_idle() == 2  # each failed once: waiting out its backoff
    async with serve(jobs, mode, elicitation=False) as mcp:
        found = await mcp.ok("diagnose_queue")
        (waiting,) = [f for f in found["findings"] if f["code"] == "RETRIES_WAITING"]
        assert (waiting["queue"], waiting["severity"], found["healthy"]) == (
            "catalog",
            "info",
            True,
        )
        assert sorted(waiting["job_ids"]) == sorted([first.id, second.id])
        assert "2 job(s) in queue catalog" in waiting["cause"]
        assert "(JOB_FAILED 2)" in waiting["cause"] and "upstream down for w" in waiting["cause"]
        assert waiting["last_error"]["code"] == "JOB_FAILED"
        line = "mcp-jobs jobs retry-all --queue catalog --state delayed --error-code JOB_FAILED"
        assert f"{line} --database-url " in waiting["fix"]
        arguments = {"queue": "catalog", "states": ["delayed"], "error_code": "JOB_FAILED"}
        assert waiting["next_call"] == {"tool": "retry_jobs", "arguments": arguments}
        planned = await mcp.ok("retry_jobs", arguments)
        assert planned["plan"]["matched"] == 2
        HEALED.update({"w1", "w2"})
        act = planned["confirm"]["next_call"]
        assert (await mcp.ok(act["tool"], act["arguments"]))["outcome"]["acted"] == 2
        assert await worker.run_until_idle() == 2  # now, not at the end of the backoff
        after = await mcp.ok("diagnose_queue")
        assert "RETRIES_WAITING" not in {f["code"] for f in after["findings"]}
    assert {(await jobs.get(r.id)).state for r in (first, second)} == {"done"}


async def test_diagnose_finds_jobs_parked_under_an_unknown_name_and_overdue_sleeps(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    ghost = await jobs.enqueue("greet", {"user_id": 9})
    sleeper = await jobs.enqueue("fulfil", {"order_id": 9})
    worker = Worker(jobs, queues=["orders"])
    await worker.run_until_idle()  # the order parks on its sleep
    greet = registry.get("greet")
    assert greet is not None
    registry.remove("greet")  # a deploy that dropped the job
    await Worker(jobs, queues=["mail"]).run_until_idle()
    assert (await jobs.get(ghost.id)).state == "suspended"
    clock.advance(10_000 + 120_000)  # the order's wake-up is two minutes past
    try:
        async with open_mcp() as mcp:
            found = await mcp.ok("diagnose_queue")
    finally:
        registry.add(greet)
    codes = {f["code"]: f for f in found["findings"]}
    assert codes["PARKED_UNKNOWN_NAME"]["job_ids"] == [ghost.id]
    assert codes["PARKED_UNKNOWN_NAME"]["severity"] == "critical"
    assert '"greet"' in codes["PARKED_UNKNOWN_NAME"]["cause"]
    overdue = {f["queue"] for f in found["findings"] if f["code"] == "SUSPENSIONS_OVERDUE"}
    assert "orders" in overdue
    assert sleeper.id not in codes["PARKED_UNKNOWN_NAME"]["job_ids"]


async def test_diagnose_reads_at_once_and_answers_a_failed_read_as_its_own_error(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reads a diagnosis needs run at once (the counts, the live workers and the backfills;
    then each queue's sampled jobs), and a refused one comes back as its own typed error once
    the others have ended."""
    await _dead_flaky(jobs, clock)
    seen: list[str] = []

    def traced(name: str, read: Any, fails: bool = False) -> Any:
        async def run(*args: object, **kwargs: object) -> Any:
            seen.append(f"start {name}")
            await anyio.lowlevel.checkpoint()
            if fails:
                seen.append(f"refused {name}")
                raise DriverUnavailableError("postgres", "connection refused")
            found = await read(*args, **kwargs)
            seen.append(f"end {name}")
            return found

        return run

    monkeypatch.setattr(jobs, "stats", traced("stats", jobs.stats))
    monkeypatch.setattr(jobs.driver, "live_workers", traced("workers", jobs.driver.live_workers))
    async with open_mcp() as mcp:
        found = await mcp.ok("diagnose_queue")
        assert "DEAD_LETTERS" in {f["code"] for f in found["findings"]}
        assert seen.index("start workers") < seen.index("end stats")
        assert seen.index("start stats") < seen.index("end workers")

        seen.clear()
        monkeypatch.setattr(jobs, "list", traced("list", jobs.list, fails=True))
        error = await mcp.fails("diagnose_queue", {}, "DRIVER_UNAVAILABLE")
        assert "connection refused" in error["cause"]
        assert "refused list" in seen and "end stats" in seen and "end workers" in seen


async def test_diagnosing_one_queue_counts_that_queue_alone(
    jobs: Jobs, open_mcp: OpenMcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A queue with rows is known by them: its diagnosis does not count every queue first to
    check the name (a queue nothing knows is still a QUEUE_UNKNOWN finding)."""
    await jobs.enqueue("greet", {"user_id": 1})
    asked: list[object] = []
    stats = jobs.stats

    async def counting(queues: Any = None, **kwargs: Any) -> Any:
        asked.append(queues)
        return await stats(queues, **kwargs)

    monkeypatch.setattr(jobs, "stats", counting)
    async with open_mcp() as mcp:
        found = await mcp.ok("diagnose_queue", {"queue": "mail"})
        assert [q["queue"] for q in found["queues"]] == ["mail"]
        assert asked == [["mail"]]
        missing = await mcp.ok("diagnose_queue", {"queue": "nosuch"})
        (finding,) = missing["findings"]
        assert finding["code"] == "QUEUE_UNKNOWN" and finding["queue"] == "nosuch"
        assert missing["healthy"] is False and missing["queues"] == []


async def test_a_failure_reads_as_a_code_and_a_fix_in_list_inspect_and_diagnose(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    r, worker = await _dead_flaky(jobs, clock)
    async with open_mcp() as mcp:
        (listed,) = (await mcp.ok("list_jobs", {"state": "dead"}))["jobs"]
        inspected = (await mcp.ok("inspect_job", {"job_id": r.id}))["job"]
        found = await mcp.ok("diagnose_queue")
        (dead,) = [f for f in found["findings"] if f["code"] == "DEAD_LETTERS"]
        for error in (listed["last_error"], inspected["last_error"], dead["last_error"]):
            assert error["code"] == "JOB_FAILED"
            assert "upstream down for k" in error["cause"]
            assert f"mcp-jobs jobs show {r.id} --json --database-url " in error["fix"]
        HEALED.add("k")
        await mcp.ok("retry_job", {"job_id": r.id})
        await worker.run_until_idle()
        done = (await mcp.ok("inspect_job", {"job_id": r.id}))["job"]
        assert done["state"] == "done" and "last_error" not in done


async def test_diagnose_names_jobs_parked_by_a_worker_that_did_not_know_them(
    jobs: Jobs, registry: JobRegistry, open_mcp: OpenMcp
) -> None:
    ghost = await jobs.enqueue("greet", {"user_id": 9})
    greet = registry.get("greet")
    assert greet is not None
    registry.remove("greet")  # the worker that claims it was started without its module
    try:
        await Worker(jobs, queues=["mail"]).run_until_idle()
    finally:
        registry.add(greet)  # ...while this server knows the name
    assert (await jobs.get(ghost.id)).state == "suspended"
    async with open_mcp() as mcp:
        found = await mcp.ok("diagnose_queue")
    (parked,) = [f for f in found["findings"] if f["code"] == "PARKED_UNKNOWN_NAME"]
    assert parked["job_ids"] == [ghost.id]


async def test_diagnose_sees_a_live_worker(jobs: Jobs, open_mcp: OpenMcp) -> None:
    await jobs.enqueue("greet", {"user_id": 1})
    worker = Worker(jobs)
    async with open_mcp() as mcp, anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        with anyio.fail_after(10):
            while not await jobs.driver.live_workers(0):
                await wait_all_tasks_blocked()
        found = await mcp.ok("diagnose_queue")
        worker.stop()
    assert found["live_workers"] == 1
    assert "NO_LIVE_WORKERS" not in {f["code"] for f in found["findings"]}


async def test_limits_come_from_the_settings(jobs: Jobs, open_mcp: OpenMcp) -> None:
    async with open_mcp(Settings(limits=ServerLimits(max_page_size=3))) as mcp:
        await mcp.ok("list_jobs", {"limit": 3})
        error = await mcp.fails("list_jobs", {"limit": 4}, "LIMIT_EXCEEDED")
        assert error["details"]["limit"] == 3
