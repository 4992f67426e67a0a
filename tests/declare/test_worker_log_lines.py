"""A worker's state-change lines name their job under the app's own logging setup: a plain
`logging.basicConfig` format writes only the message, so the message holds the job's id and
name after the event's name; the structured `job` field stays, and the engine's formatters,
which write those fields beside the message, keep the message the bare event name."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, job
from engine.drivers.memory import MemoryDriver
from engine.errors import JobDeclarationInvalidError
from engine.ids import new_ids
from engine.logs import JsonFormatter, TextFormatter
from schemas.jobs import EnqueueRequest


class Nap(BaseModel):
    n: int


@pytest.fixture
def streams() -> Iterator[dict[str, io.StringIO]]:
    """The worker's log as a plain format, the engine's JSON and the engine's text write it."""
    logger = logging.getLogger("mcp_jobs.worker")
    formats: dict[str, logging.Formatter] = {
        "plain": logging.Formatter("%(levelname)s:%(name)s:%(message)s"),
        "json": JsonFormatter(),
        "text": TextFormatter(),
    }
    handlers: list[logging.Handler] = []
    out = {kind: io.StringIO() for kind in formats}
    for kind, formatter in formats.items():
        handler: logging.Handler = logging.StreamHandler(out[kind])
        handler.setFormatter(formatter)
        logger.addHandler(handler)
        handlers.append(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        yield out
    finally:
        logger.setLevel(level)
        for handler in handlers:
            logger.removeHandler(handler)


async def test_a_plain_format_names_the_job_of_each_line(
    clock: ManualClock, registry: JobRegistry, streams: dict[str, io.StringIO]
) -> None:
    @job(idempotency_key=lambda i: str(i.n), registry=registry)
    async def napper(input: Nap, ctx: JobContext) -> None:
        await ctx.step.sleep("nap", 60)

    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    parked = await jobs.enqueue(napper, {"n": 1})
    with anyio.fail_after(10):
        await Worker(jobs, prune=False).run_until_idle()

    plain = streams["plain"].getvalue().splitlines()
    (line,) = [text for text in plain if "job.parked" in text]
    assert line.startswith("INFO:mcp_jobs.worker:job.parked ")
    assert parked.id in line and "napper" in line
    (claimed,) = [text for text in plain if "job.claimed" in text]
    assert parked.id in claimed

    # The engine's own formatters: the message is the event, the fields ride beside it.
    entries = [json.loads(text) for text in streams["json"].getvalue().splitlines()]
    (entry,) = [e for e in entries if e["job"]["kind"] == "parked"]
    assert entry["message"] == "job.parked" and entry["job"]["job_id"] == parked.id
    (text,) = [t for t in streams["text"].getvalue().splitlines() if "job.parked" in t]
    assert f' job.parked kind="parked" job_id="{parked.id}" ' in text


async def test_a_name_with_a_line_break_cannot_forge_a_plain_line(
    clock: ManualClock, registry: JobRegistry, streams: dict[str, io.StringIO]
) -> None:
    # A declaration refuses such a name now; a row stored before that rule still reaches a
    # worker claiming every queue, which parks it as unknown and logs its name.
    with pytest.raises(JobDeclarationInvalidError):
        job(idempotency_key=lambda i: str(i.n), name="nap\nERROR:forged", registry=registry)(_nap)
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    job_id, run_id = new_ids(2, clock.now_ms())
    stored = EnqueueRequest(
        job_id, run_id, "nap\nERROR:forged", "default", "1", {"n": 1}, clock.now_ms(), 3, None
    )
    await jobs.driver.enqueue([stored], now=clock.now_ms())
    with anyio.fail_after(10):
        await Worker(jobs, queues="*", prune=False).run_until_idle()
    plain = streams["plain"].getvalue().splitlines()
    assert plain and all(line.startswith(("DEBUG:", "INFO:")) for line in plain), plain
    assert any('name="nap\\nERROR:forged"' in line for line in plain), plain


async def _nap(input: Nap, ctx: JobContext) -> None:
    await ctx.step.sleep("nap", 60)
