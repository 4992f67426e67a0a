"""A job's input, step or output past what this NATS server takes in one value is refused with
a fix that works when followed once: it names everything to change (the server's
`max_payload`, to a value that holds the job, and the engine's own bound when that is short
too), or says plainly that no NATS server can hold it.

The engine's output bound used to answer "export MCP_JOBS_MAX_PAYLOAD_BYTES=N" alone; a user
who followed it was refused again by the server's max_payload, whose own fix then named no value.
Its input bound answered "pass input as at most 1048576 bytes", which a default server refuses
again. The engine now asks the driver where it refuses (engine.drivers.base `RecordBounds`), so
the error as raised, not only as stored, names every setting.
"""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, connect, job
from engine.bounds import PAYLOAD_ENV
from engine.errors import InvalidArgumentError, JobsError
from engine.observe import WorkerEvent
from schemas.errors import ErrorPayload
from tests.nats.max_payload_server import Serve

pytest.importorskip("nats", reason="the nats extra is not installed")

# Past the engine's default bound (1 MiB of JSON) and what one value of a default server holds.
PAST_BOTH = 1_200_000
# Within the engine's bound, past what a default server's value holds beside a half-MB input.
PAST_THE_VALUE = 700_000
HALF = 500_000
# Inputs: past the engine's bound and the value; just under the engine's bound; past what a
# default server's value holds (~916,000 bytes of JSON) and within the engine's bound.
INPUTS = {"past-both": 2_000_000, "under-1-mib": 1_048_400, "past-the-value": 950_000}
# What the input's JSON adds to its string: `{"p":"","n":1}`.
FILLER = 14
# Past any lease and retry delay.
LATER_MS = 3_600_000


class Big(BaseModel):
    p: str
    n: int = 0


def _define(registry: JobRegistry, output: int, step: int = 0) -> Any:
    @job(idempotency_key=lambda i: str(i.n), registry=registry)
    async def big(input: Big, ctx: JobContext) -> str:
        if step:
            await ctx.step.run("s", lambda: "s" * step)
        return "o" * output

    return big


async def _failed_error(jobs: Jobs, fn: Any, p: int, clock: ManualClock) -> ErrorPayload:
    """The error the job's one run failed with."""
    result = await jobs.enqueue(fn, {"p": "P" * p})
    with anyio.fail_after(60):
        await Worker(jobs).run_until_idle()
        clock.advance(LATER_MS)
        await Worker(jobs).run_until_idle()
    record = await jobs.get(result.id)
    assert record.state == "failed" and record.last_error is not None
    assert record.last_error.code == "JOB_OUTPUT_INVALID"
    return record.last_error


async def _runs(url: str, bound: int | None, output: int, step: int, p: int) -> str:
    """The state the job reaches on `url`, the engine's bound given (the fix's export)."""
    registry = JobRegistry()
    fn = _define(registry, output, step)
    jobs = await connect(url, registry=registry, max_payload_bytes=bound)
    try:
        result = await jobs.enqueue(fn, {"p": "P" * p, "n": 1})
        with anyio.fail_after(60):
            await Worker(jobs).run_until_idle()
        record = await jobs.get(result.id)
        return f"{record.state} {record.last_error.fix if record.last_error else ''}"
    finally:
        await jobs.close()


def _followed(error: ErrorPayload, here: str, serve: Serve) -> tuple[str, int | None]:
    """Where the fix sends the job (a server with the max_payload it asks for, else this one)
    and the engine bound it exports, if any."""
    wanted = (error.details or {}).get("max_payload")
    if wanted is not None:
        assert isinstance(wanted, int) and f"max_payload: {wanted}" in error.fix, error.fix
    export = f"export {PAYLOAD_ENV}="
    bound = int(error.fix.split(export)[1].split()[0]) if export in error.fix else None
    return (here if wanted is None else serve(wanted)), bound


@pytest.mark.parametrize(("output", "step"), [(PAST_BOTH, 0), (0, PAST_BOTH)], ids=["out", "step"])
async def test_past_the_engine_bound_and_the_server_the_fix_names_both(
    jobs: Jobs,
    registry: JobRegistry,
    clock: ManualClock,
    serve: Serve,
    database_url: str,
    output: int,
    step: int,
) -> None:
    error = await _failed_error(jobs, _define(registry, output, step), 10, clock)
    url, bound = _followed(error, database_url, serve)
    assert bound is not None and bound >= PAST_BOTH, error.fix
    assert await _runs(url, bound, output, step, 10) == "done "


async def test_past_the_value_the_fix_names_a_max_payload_that_holds_the_job(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, serve: Serve, database_url: str
) -> None:
    error = await _failed_error(jobs, _define(registry, PAST_THE_VALUE), HALF, clock)
    url, bound = _followed(error, database_url, serve)
    assert bound is None, error.fix  # within the engine's bound: the server alone is short
    assert await _runs(url, None, PAST_THE_VALUE, 0, HALF) == "done "


async def test_an_input_past_the_value_names_a_max_payload_that_takes_it(
    jobs: Jobs, registry: JobRegistry, serve: Serve, database_url: str
) -> None:
    fn = _define(registry, 10)
    p = 1_048_400
    with anyio.fail_after(30), pytest.raises(InvalidArgumentError) as caught:
        await jobs.enqueue(fn, {"p": "P" * p})
    error = caught.value
    assert error.details is not None and "bound" in error.details  # the smaller input it takes
    url, _ = _followed(ErrorPayload(**error.to_payload().model_dump()), database_url, serve)
    assert await _runs(url, None, 10, 0, p) == "done "


def _input_fix(fix: str) -> tuple[int, int | None, int | None]:
    """An input refusal's fix, one line: the smaller input it names (in bytes of JSON), and
    the max_payload and engine bound its other branch sets, if it names them."""
    assert "\n" not in fix, fix
    smaller = re.search(r"(?:send an input of|pass input as) at most (\d+) bytes of JSON", fix)
    wanted = re.search(r"set max_payload: (\d+) in nats-server's config and restart it", fix)
    export = re.search(rf"export {PAYLOAD_ENV}=(\d+)", fix)
    assert smaller is not None, fix
    return (
        int(smaller[1]),
        None if wanted is None else int(wanted[1]),
        None if export is None else int(export[1]),
    )


@pytest.mark.parametrize("p", list(INPUTS.values()), ids=list(INPUTS))
async def test_an_input_refused_once_runs_following_either_branch_of_its_fix(
    jobs: Jobs, registry: JobRegistry, serve: Serve, database_url: str, p: int
) -> None:
    fn = _define(registry, 10)
    with anyio.fail_after(30), pytest.raises(InvalidArgumentError) as caught:
        await jobs.enqueue(fn, {"p": "P" * p})
    fix = caught.value.fix
    smaller, wanted, export = _input_fix(fix)
    # Sending less, on this server with this engine bound, is taken.
    assert await _runs(database_url, None, 10, 0, smaller - FILLER) == "done ", fix
    # Setting what it names, once, takes the same input: the engine's bound only where the
    # input is past it.
    assert wanted is not None, fix
    assert (export is not None) == (p + FILLER > jobs.max_payload_bytes), fix
    assert await _runs(serve(wanted), export, 10, 0, p) == "done ", fix


@pytest.mark.parametrize(("output", "step"), [(PAST_BOTH, 0), (0, PAST_BOTH)], ids=["out", "step"])
async def test_the_engine_raises_a_payload_error_that_names_the_servers_setting(
    jobs: Jobs,
    registry: JobRegistry,
    clock: ManualClock,
    serve: Serve,
    database_url: str,
    output: int,
    step: int,
) -> None:
    """The error as the engine raises it (what a worker's listeners and the job's body see),
    not only as the driver stores it, names the max_payload the value needs."""
    failed: list[BaseException] = []

    def heard(event: WorkerEvent) -> None:
        if event.kind == "failed" and event.exc is not None:
            failed.append(event.exc)

    result = await jobs.enqueue(_define(registry, output, step), {"p": "P" * 10})
    with anyio.fail_after(60):
        await Worker(jobs, listeners=[heard]).run_until_idle()
        clock.advance(LATER_MS)
        await Worker(jobs, listeners=[heard]).run_until_idle()
    assert (await jobs.get(result.id)).state == "failed"
    (raised,) = failed
    assert isinstance(raised, JobsError) and raised.code == "JOB_OUTPUT_INVALID"
    url, bound = _followed(ErrorPayload(**raised.to_payload().model_dump()), database_url, serve)
    assert url != database_url, raised.fix  # a default server cannot hold it
    assert bound is not None and bound >= PAST_BOTH, raised.fix
    assert await _runs(url, bound, output, step, 10) == "done "
