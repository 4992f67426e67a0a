"""The mutating tools: enqueue, retry, cancel — each success, each error, and the audit event."""

from __future__ import annotations

import logging

import pytest

from engine import Jobs, ManualClock, Worker
from engine.bounds import MAX_DELAY_MS
from engine.driver_errors import DriverUnavailableError
from engine.instants import iso
from mcp_jobs.config import ServerLimits, Settings
from mcp_jobs.errors import example_call
from mcp_jobs.server.audit import AUDIT_EVENT
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import HEALED


async def test_enqueue_validates_enqueues_and_dedupes_a_live_job(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        first = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 42}})
        assert first["deduped"] is False and first["state"] == "ready"
        again = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 42}})
        assert again["deduped"] is True and again["job_id"] == first["job_id"]
        later = await mcp.ok(
            "enqueue_job", {"name": "greet", "input": {"user_id": 43}, "delay_seconds": 60}
        )
        assert later["state"] == "delayed"
        record = await jobs.get(first["job_id"])
        assert record.input == {"user_id": 42, "note": ""}
        assert record.enqueued_by == "mcp:enqueue_job"

        error = await mcp.fails(
            "enqueue_job",
            {"name": "greet", "input": {"user_id": 42}, "on_conflict": "error"},
            "JOB_DUPLICATE",
        )
        assert error["next_call"] == {
            "tool": "inspect_job",
            "arguments": {"job_id": first["job_id"]},
        }


async def test_enqueue_refuses_bad_input_with_the_field_errors(open_mcp: OpenMcp) -> None:
    async with open_mcp() as mcp:
        error = await mcp.fails(
            "enqueue_job", {"name": "greet", "input": {"user_id": 0}}, "JOB_INPUT_INVALID"
        )
        (field,) = error["details"]["errors"]
        assert field["loc"] == ["user_id"] and field["type"] == "greater_than_equal"
        assert error["next_call"] == {"tool": "describe_jobs", "arguments": {"name": "greet"}}
        empty = {"name": "greet", "input": {}}
        missing = await mcp.fails("enqueue_job", empty, "JOB_INPUT_INVALID")
        assert missing["details"]["errors"][0]["type"] == "missing"

        # A field under a name that plainly stands for the declared one: the call with it
        # renamed is the fix (a write: shown, not run); anything else left, the schema is.
        camel = await mcp.fails(
            "enqueue_job", {"name": "greet", "input": {"userId": 5}}, "JOB_INPUT_INVALID"
        )
        assert camel["fix"] == 'enqueue_job {"name": "greet", "input": {"user_id": 5}}', camel
        assert "next_call" not in camel, camel
        more = {"name": "greet", "input": {"userId": 5, "color": "red"}}
        also = await mcp.fails("enqueue_job", more, "JOB_INPUT_INVALID")
        assert also["next_call"] == {"tool": "describe_jobs", "arguments": {"name": "greet"}}

        unknown = await mcp.fails("enqueue_job", {"name": "nope", "input": {}}, "JOB_UNKNOWN")
        assert unknown["details"]["known"] == ["flaky", "fulfil", "greet", "receipt"]
        await mcp.fails(
            "enqueue_job", {"name": "receipt", "input": {"order_id": 1}}, "JOB_TENANT_REQUIRED"
        )
        await mcp.fails(
            "enqueue_job",
            {"name": "greet", "input": {"user_id": 1}, "delay_seconds": -5},
            "INVALID_ARGUMENT",
        )
        both = await mcp.fails(
            "enqueue_job",
            {"name": "greet", "input": {"user_id": 1}, "delay_seconds": 1, "run_at": 10**12},
            "INVALID_ARGUMENT",
        )
        # Named as the tool names it, and mended by leaving it out (prose naming the engine's
        # `delay` before): the call runs as given.
        assert both["details"]["argument"] == "delay_seconds"
        assert both["cause"].startswith("delay_seconds=1 is not"), both  # as given, not 1.0
        call = both["next_call"]
        assert call["arguments"] == {"name": "greet", "input": {"user_id": 1}, "run_at": 10**12}
        assert (await mcp.ok(call["tool"], call["arguments"]))["job_id"]
        await mcp.fails(
            "enqueue_job",
            {"name": "greet", "input": {"user_id": 1}, "on_conflict": "replace"},
            "TOOL_ARGUMENTS_INVALID",
        )


async def test_enqueue_takes_run_at_as_the_iso_text_answers_show(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    """An agent is shown every time as `*_at_iso` text and may pass it back as `run_at`: it
    was refused as not an integer, with a `"<run_at>"` slot it had to fill with arithmetic."""
    hour = clock.now_ms() + 3_600_000
    greet = {"name": "greet", "input": {"user_id": 1}}
    async with open_mcp() as mcp:
        later = await mcp.ok("enqueue_job", {**greet, "run_at": iso(hour)})
        shown = await mcp.ok("inspect_job", {"job_id": later["job_id"]})
        assert later["state"] == "delayed" and shown["job"]["run_at"] == hour
        assert shown["job"]["run_at_iso"] == iso(hour)

        # No zone: which one it meant is not plain, so the fix (which runs) says UTC.
        naive = iso(hour + 1000).removesuffix("Z")
        error = await mcp.fails(
            "enqueue_job", {**greet, "input": {"user_id": 2}, "run_at": naive}, "INVALID_ARGUMENT"
        )
        call = error["next_call"]
        assert call["arguments"]["run_at"] == iso(hour + 1000) and "UTC" in error["cause"]
        mended = await mcp.ok(call["tool"], call["arguments"])
        assert (await jobs.get(mended["job_id"])).run_at == hour + 1000

        # Past ten years: the fix is the call at that bound, in the form given.
        far = {**greet, "input": {"user_id": 3}, "run_at": "2099-01-01T00:00:00Z"}
        error = await mcp.fails("enqueue_job", far, "INVALID_ARGUMENT")
        bound = iso(clock.now_ms() + MAX_DELAY_MS)
        assert error["next_call"]["arguments"] == {**far, "run_at": bound}

        # Text that is no time: a slot, nothing guessed; -5: the range's low end (2001), mended.
        error = await mcp.fails("enqueue_job", {**greet, "run_at": "soon"}, "INVALID_ARGUMENT")
        assert '"run_at": "<run_at>"' in error["fix"] and "next_call" not in error
        error = await mcp.fails("enqueue_job", {**greet, "run_at": -5}, "INVALID_ARGUMENT")
        assert error["next_call"]["arguments"]["run_at"] == 10**12
    assert len((await jobs.list()).jobs) == 2


async def test_enqueue_refuses_an_input_over_the_size_limit(jobs: Jobs, open_mcp: OpenMcp) -> None:
    """Its fix is the caller's call with an "<input>" slot: it printed a `{"ref": …}` input the
    job need not take, and left out the tenant, key and priority the caller gave."""
    async with open_mcp(Settings(limits=ServerLimits(max_input_bytes=100))) as mcp:
        given = {"input": {"user_id": 1, "note": "x" * 200}, "tenant_id": "t1", "priority": 3}
        error = await mcp.fails("enqueue_job", {"name": "greet", **given}, "LIMIT_EXCEEDED")
        assert error["details"]["argument"] == "input" and error["details"]["limit"] == 100
        slot = {"name": "greet", "input": "<input>", "tenant_id": "t1", "priority": 3}
        assert error["fix"] == f"enqueue_job {example_call(slot)}" and "next_call" not in error
        assert "keep its data in your own storage" in error["cause"], error
        await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 1, "note": "short"}})
    assert len((await jobs.list()).jobs) == 1


async def test_every_mutating_call_is_recorded_as_an_event(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        made = await mcp.ok(
            "enqueue_job", {"name": "receipt", "input": {"order_id": 5}, "tenant_id": "acme"}
        )
        await mcp.ok("cancel_job", {"job_id": made["job_id"]})
        await mcp.fails("retry_job", {"job_id": made["job_id"]}, "JOB_NOT_RETRYABLE")
        await mcp.ok("inspect_job", {"job_id": made["job_id"]})  # reads are not recorded
    trace = await jobs.trace(made["job_id"])
    audit = [e for e in trace.events if e.kind == AUDIT_EVENT]
    assert [(e.actor, e.tenant_id, e.at) for e in audit] == [
        ("mcp:enqueue_job", "acme", clock.now_ms()),
        ("mcp:cancel_job", "acme", clock.now_ms()),
        ("mcp:retry_job", "acme", clock.now_ms()),
    ]
    assert audit[0].data is not None and audit[0].data["tool"] == "enqueue_job"
    assert audit[0].data["ok"] is True
    # The engine's own record of the cancel names the tool as the actor.
    (cancelled,) = [e for e in trace.events if e.kind == "cancelled"]
    assert cancelled.actor == "mcp:cancel_job"
    # The refused retry is recorded too: the caller could see the job, so on it.
    assert audit[2].data is not None and audit[2].data["ok"] is False
    assert audit[2].data["error_code"] == "JOB_NOT_RETRYABLE"


async def test_retry_requeues_a_dead_job_and_refuses_the_rest(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    dead = await jobs.enqueue("flaky", {"key": "a"})
    worker = Worker(jobs)
    await worker.run_until_idle()
    clock.advance(1_000)
    await worker.run_until_idle()
    live = await jobs.enqueue("greet", {"user_id": 1})
    async with open_mcp() as mcp:
        error = await mcp.fails("retry_job", {"job_id": live.id}, "JOB_NOT_RETRYABLE")
        assert error["details"]["state"] == "ready"
        await mcp.fails("retry_job", {"job_id": "0" * 32}, "JOB_NOT_FOUND")

        # While another live job holds the key, the dead one cannot come back.
        holder = await jobs.enqueue("flaky", {"key": "a"})
        duplicate = await mcp.fails("retry_job", {"job_id": dead.id}, "JOB_DUPLICATE")
        # Said of the retry: the tool takes no on_conflict, whose refusal the cause once was.
        assert "a retry or rerun" in duplicate["cause"] and holder.id in duplicate["fix"]
        await jobs.cancel(holder.id)

        HEALED.add("a")
        retried = await mcp.ok("retry_job", {"job_id": dead.id})
        assert retried["job"]["state"] == "ready" and retried["job"]["attempt"] == 0
        await worker.run_until_idle()
        assert (await jobs.get(dead.id)).state == "done"
        trace = await jobs.trace(dead.id)
        assert "mcp:retry_job" in [e.actor for e in trace.events if e.kind == "requeued"]


async def test_retry_runs_a_delayed_job_now(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        later = await mcp.ok(
            "enqueue_job", {"name": "greet", "input": {"user_id": 1}, "delay_seconds": 3600}
        )
        assert later["state"] == "delayed"
        now = await mcp.ok("retry_job", {"job_id": later["job_id"]})
        assert (now["job"]["state"], now["job"]["run_at"]) == ("ready", clock.now_ms())
        assert await Worker(jobs).run_until_idle() == 1
        done = await mcp.ok("inspect_job", {"job_id": later["job_id"]})
        assert done["job"]["state"] == "done"
        # Once it has run, a retry is refused and says which states a retry takes.
        error = await mcp.fails("retry_job", {"job_id": later["job_id"]}, "JOB_NOT_RETRYABLE")
        assert "failed, dead or delayed jobs can be retried" in error["cause"]


async def test_a_cancelled_job_comes_back_only_when_asked(jobs: Jobs, open_mcp: OpenMcp) -> None:
    r = await jobs.enqueue("greet", {"user_id": 1})
    async with open_mcp() as mcp:
        cancelled = await mcp.ok("cancel_job", {"job_id": r.id})
        assert cancelled["job"]["state"] == "cancelled" and cancelled["stopping"] is False
        error = await mcp.fails("retry_job", {"job_id": r.id}, "JOB_NOT_RETRYABLE")
        assert error["next_call"] == {
            "tool": "retry_job",
            "arguments": {"job_id": r.id, "include_cancelled": True},
        }
        assert f"mcp-jobs jobs retry {r.id} --include-cancelled --database-url " in error["fix"]
        back = await mcp.ok("retry_job", error["next_call"]["arguments"])
        assert back["job"]["state"] == "ready"


async def test_cancel_tells_a_running_job_to_stop_and_refuses_a_settled_one(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    running = await jobs.enqueue("greet", {"user_id": 1})
    await jobs.driver.claim("w-1", 1, 30_000)
    done = await jobs.enqueue("greet", {"user_id": 2})
    await Worker(jobs).run_until_idle()
    async with open_mcp() as mcp:
        stopping = await mcp.ok("cancel_job", {"job_id": running.id})
        assert stopping["stopping"] is True and stopping["job"]["state"] == "cancelled"
        error = await mcp.fails("cancel_job", {"job_id": done.id}, "JOB_NOT_CANCELLABLE")
        assert error["details"]["state"] == "done"
        await mcp.fails("cancel_job", {"job_id": "0" * 32}, "JOB_NOT_FOUND")


async def test_an_audit_line_lost_to_an_outage_is_logged_as_one_line(
    jobs: Jobs, open_mcp: OpenMcp, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """While the database is down every mutating call's audit write fails too: each logged a
    traceback. A typed failure is one warning naming its code; the answer is the call's own."""

    async def down(*args: object, **kwargs: object) -> None:
        raise DriverUnavailableError("postgres", "connection refused")

    monkeypatch.setattr(jobs, "enqueue", down)
    monkeypatch.setattr(jobs, "record_event", down)
    caplog.set_level(logging.WARNING, logger="mcp_jobs")
    async with open_mcp() as mcp:
        greet = {"name": "greet", "input": {"user_id": 1}}
        await mcp.fails("enqueue_job", greet, "DRIVER_UNAVAILABLE")
    lost = [r for r in caplog.records if "audit event for enqueue_job not recorded" in r.message]
    assert len(lost) == 1 and lost[0].exc_info is None, [r.message for r in lost]
    assert "DRIVER_UNAVAILABLE: postgres: connection refused" in lost[0].getMessage()


async def test_a_key_the_job_computes_too_long_names_the_input_to_shorten(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """The fix was `pass idempotency_key as …`: enqueue_job has no such argument, its key is
    the one the job computes. Now the input field the key holds is a slot, the rest as given."""
    async with open_mcp() as mcp:
        given = {"name": "flaky", "input": {"key": "s" * 1100}, "priority": 3}
        error = await mcp.fails("enqueue_job", given, "INVALID_ARGUMENT")
        assert error["retryable"] is False and error["details"]["argument"] == "input.key"
        assert "1106 bytes" in error["cause"] and "1024" in error["cause"], error
        assert "idempotency_key" not in error["fix"] and "next_call" not in error
        slot = {"name": "flaky", "input": {"key": "<key>"}, "priority": 3}
        assert error["fix"] == f"enqueue_job {example_call(slot)}", error
        await mcp.ok("enqueue_job", {**given, "input": {"key": "s" * 100}})
    assert len((await jobs.list()).jobs) == 1


async def test_a_tenant_required_refusal_carries_the_callers_own_input(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """Its fix was `{"input": {...}, …}`: not JSON, and the caller's input gone."""
    async with open_mcp() as mcp:
        given = {"name": "receipt", "input": {"order_id": 9}, "priority": 1}
        error = await mcp.fails("enqueue_job", given, "JOB_TENANT_REQUIRED")
        slot = {"name": "receipt", "input": {"order_id": 9}, "tenant_id": "<tenant_id>"}
        slot["priority"] = 1  # in the order the tool lists its arguments
        assert error["fix"] == f"enqueue_job {example_call(slot)}", error
        assert "next_call" not in error  # the tenant is the caller's to name
        made = await mcp.ok("enqueue_job", {**given, "tenant_id": "acme"})
        assert made["tenant_id"] == "acme"
    assert len((await jobs.list()).jobs) == 1
