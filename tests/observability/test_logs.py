"""Structured logs: one JSON record per job state change, with the job's fields, through standard
logging; a job body's own `ctx.log` lines carry the same fields."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Retry, Worker, job
from engine.errors import JobsError
from engine.logs import JsonFormatter, TextFormatter, configure_logging
from engine.retry import retry_schedule
from tests.support.observe import Recorder


class Item(BaseModel):
    n: int


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """The `mcp_jobs` loggers as JSON lines into a buffer, at DEBUG, restored afterwards."""
    target = logging.getLogger("mcp_jobs")
    level = target.level
    stream = io.StringIO()
    handler = configure_logging(json=True, level="DEBUG", stream=stream, logger="mcp_jobs")
    try:
        yield stream
    finally:
        target.removeHandler(handler)
        target.setLevel(level)


def records(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


async def test_every_state_change_is_one_json_record_with_the_job_fields(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, json_log: io.StringIO
) -> None:
    gate = anyio.Event()

    @job(idempotency_key=lambda i: f"i:{i.n}", queue="q", concurrency=1, registry=registry)
    async def capped(input: Item, ctx: JobContext) -> None:
        await gate.wait()

    policy = Retry(attempts=2)

    @job(idempotency_key=lambda i: f"i:{i.n}", queue="q", retry=policy, registry=registry)
    async def doomed(input: Item, ctx: JobContext) -> None:
        ctx.log.info("trying %d", input.n)
        raise RuntimeError("down")

    @job(idempotency_key=lambda i: f"i:{i.n}", queue="q", registry=registry)
    async def napper(input: Item, ctx: JobContext) -> None:
        await ctx.step.sleep("nap", 60)

    capped_ids = {(await jobs.enqueue(capped, {"n": n}, tenant_id="acme")).id for n in (1, 2)}
    dead = await jobs.enqueue(doomed, {"n": 3})
    parked = await jobs.enqueue(napper, {"n": 4})
    recorder = Recorder()
    worker = Worker(jobs, concurrency=4, listeners=[recorder], lease_ms=600_000)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run_until_idle)
        shed = await recorder.wait("shed")
        gate.set()
    (held_id,) = capped_ids - {shed.job_id}
    clock.advance(sum(retry_schedule(policy)) + 1)
    await worker.run_until_idle()

    lines = records(json_log)
    state_changes = [r for r in lines if r["logger"] == "mcp_jobs.worker"]
    # One record per event the worker emitted, in order, each naming its job.
    assert [(r["job"]["kind"], r["job"]["job_id"]) for r in state_changes] == [
        (e.kind, e.job_id) for e in recorder.events
    ]
    by_kind = {(r["job"]["kind"], r["job"]["job_id"]): r for r in state_changes}
    shed_record = by_kind[("shed", shed.job_id)]
    assert shed_record["message"] == "job.shed" and shed_record["level"] == "DEBUG"
    assert shed_record["job"]["reason"] == "at cap job:capped"
    assert {k: shed_record["job"][k] for k in ("name", "queue", "tenant_id", "attempt")} == {
        "name": "capped",
        "queue": "q",
        "tenant_id": "acme",
        "attempt": 1,
    }
    assert ("succeeded", held_id) in by_kind
    assert by_kind[("claimed", held_id)]["level"] == "DEBUG"
    assert by_kind[("retried", dead.id)]["job"]["error"] == "RuntimeError: down"
    assert by_kind[("dead", dead.id)]["level"] == "ERROR"
    assert by_kind[("dead", dead.id)]["job"]["attempt"] == 2
    assert by_kind[("parked", parked.id)]["job"]["reason"] == "step 'nap' sleeping"
    # The body's own lines carry the job too.
    body = [r for r in lines if r["logger"] == "mcp_jobs.job.doomed"]
    assert [r["message"] for r in body] == ["trying 3", "trying 3"]
    assert [r["job"]["attempt"] for r in body] == [1, 2]
    assert all(r["job"]["job_id"] == dead.id for r in body)


@pytest.mark.drivers("memory", reason="formatting does not involve the database")
async def test_exceptions_and_odd_values_still_make_one_json_line(jobs: Jobs) -> None:
    logger = logging.getLogger("mcp_jobs.test.odd")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    try:
        try:
            raise ValueError("boom")
        except ValueError:
            logger.error("it broke\nacross lines", exc_info=True, extra={"thing": {1, 2}})
    finally:
        logger.removeHandler(handler)
    (line,) = stream.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["message"] == "it broke\nacross lines"
    assert entry["level"] == "ERROR" and entry["logger"] == "mcp_jobs.test.odd"
    assert "ValueError: boom" in entry["exc"]
    assert entry["thing"] == "{1, 2}"
    assert entry["ts"].endswith("+00:00")


@pytest.mark.drivers("memory", reason="formatting does not involve the database")
async def test_text_format_puts_the_job_fields_on_the_line(jobs: Jobs) -> None:
    record = logging.LogRecord("mcp_jobs.worker", logging.INFO, __file__, 1, "job.shed", None, None)
    record.job = {"job_id": "j1", "reason": "at cap global", "attempt": 0}
    line = TextFormatter().format(record)
    assert line.endswith('job.shed job_id="j1" reason="at cap global" attempt=0')


@pytest.mark.drivers("memory", reason="handler setup does not involve the database")
async def test_configure_logging_replaces_its_handler_and_refuses_unknown_levels(
    jobs: Jobs,
) -> None:
    name = "mcp_jobs.test.configure"
    target = logging.getLogger(name)
    try:
        configure_logging(json=False, level="warning", stream=io.StringIO(), logger=name)
        second = configure_logging(
            json=True, level=logging.DEBUG, stream=io.StringIO(), logger=name
        )
        assert target.handlers == [second]
        assert isinstance(second.formatter, JsonFormatter)
        assert target.level == logging.DEBUG
        with pytest.raises(JobsError) as raised:
            configure_logging(level="LOUD", logger=name)
        assert raised.value.code == "INVALID_ARGUMENT"
    finally:
        for handler in list(target.handlers):
            target.removeHandler(handler)
        target.setLevel(logging.NOTSET)


def _text_line(msg: str, *args: object, **extra: Any) -> str:
    record = logging.LogRecord("mcp_jobs.dashboard", logging.WARNING, __file__, 1, msg, args, None)
    for key, value in extra.items():
        setattr(record, key, value)
    return TextFormatter().format(record)


@pytest.mark.drivers("memory", reason="formatting does not involve the database")
async def test_text_format_keeps_a_logged_value_on_its_own_line(jobs: Jobs) -> None:
    # A request path or a queue name is anyone's text: a line break in it must not start a
    # line that looks like the system's own (a forged ERROR).
    forged = "/x\n2026-12-06 00:00:00,000 ERROR mcp_jobs.worker job.dead FORGED"
    for breaker in ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029", "\x1b"):
        line = _text_line(
            "refused %s", forged.replace("\n", breaker), job={"queue": f"a{breaker}b"}
        )
        assert len(line.splitlines()) == 1, repr(line)
        assert breaker not in line
    line = _text_line("refused %s", forged)
    assert line.endswith(
        "refused /x\\n2026-12-06 00:00:00,000 ERROR mcp_jobs.worker job.dead FORGED"
    )


@pytest.mark.drivers("memory", reason="formatting does not involve the database")
async def test_text_format_writes_names_in_any_script_as_themselves(jobs: Jobs) -> None:
    line = _text_line("running %s", "очередь-🚀", job={"queue": "очередь-🚀", "bad": "a\ud800b"})
    assert line.endswith('running очередь-🚀 queue="очередь-🚀" bad="a\\ud800b"')
    line.encode("utf-8")  # a lone surrogate is escaped, so the line can be written at all


@pytest.mark.drivers("memory", reason="formatting does not involve the database")
async def test_text_format_keeps_a_traceback_below_the_line_and_indented(jobs: Jobs) -> None:
    try:
        raise ValueError("boom\n2026-12-06 00:00:00,000 ERROR forged")
    except ValueError:
        record = logging.LogRecord(
            "mcp_jobs.worker", logging.ERROR, __file__, 1, "it broke", None, sys.exc_info()
        )
    lines = TextFormatter().format(record).splitlines()
    assert lines[0].endswith("ERROR mcp_jobs.worker it broke")
    # Every line below the record's first is indented: none can pass for a record of its own.
    assert len(lines) > 2 and all(line.startswith("    ") for line in lines[1:])
    assert lines[1] == "    Traceback (most recent call last):"
