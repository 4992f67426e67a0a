"""Trace context end to end, both protocol eras: a `traceparent` in the request's `_meta`
parents the job a tool enqueues (enqueue_job, run_backfill write=true), its first attempt joins
that trace and a retry does too; a malformed one is ignored with a debug log.

The servers here run without the SDK's OpenTelemetry middleware: the trace must come from the
request itself, not from an ambient span that middleware happens to set."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from mcp import Client
from opentelemetry import trace
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Retry, Worker, job
from engine.backfill import BackfillRegistry
from engine.tracing import current_traceparent, parse_traceparent
from mcp_jobs.config import Settings
from mcp_jobs.server import build_server
from mcp_jobs.server.trace_context import request_traceparent
from tests.backfill.support import Customers
from tests.mcp.support import Caller

TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
SERVER_SPAN = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
OTHER_TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class Once(BaseModel):
    key: str


@asynccontextmanager
async def bare_serve(
    jobs: Jobs, mode: str, backfills: BackfillRegistry | None = None
) -> AsyncIterator[Caller]:
    server = build_server(Settings(), jobs, backfills=backfills or BackfillRegistry())
    server._lowlevel_server.middleware.clear()  # no ambient span from the SDK
    async with Client(server, mode=mode) as client:
        caller = Caller(client)
        await caller.load()
        yield caller


async def test_enqueue_job_parents_the_job_on_the_callers_trace(
    jobs: Jobs, app: JobRegistry, mode: str
) -> None:
    async with bare_serve(jobs, mode) as mcp:
        traced = await mcp.ok(
            "enqueue_job",
            {"name": "greet", "input": {"user_id": 1}},
            meta={"traceparent": CALLER},
        )
        plain = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 2}})
    assert (await jobs.get(traced["job_id"])).traceparent == CALLER
    assert (await jobs.get(plain["job_id"])).traceparent is None


async def test_a_malformed_traceparent_is_ignored_with_a_debug_log(
    jobs: Jobs, app: JobRegistry, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="mcp_jobs.server.trace_context")
    async with bare_serve(jobs, mode) as mcp:
        done = await mcp.ok(
            "enqueue_job",
            {"name": "greet", "input": {"user_id": 1}},
            meta={"traceparent": "00-nope"},
        )
    assert (await jobs.get(done["job_id"])).traceparent is None
    (logged,) = [r for r in caplog.records if r.name == "mcp_jobs.server.trace_context"]
    assert logged.levelno == logging.DEBUG and "00-nope" in logged.getMessage()


async def test_a_backfill_write_parents_its_pass_on_the_callers_trace(
    jobs: Jobs,
    app: JobRegistry,
    mode: str,
    backfill_registry: BackfillRegistry,
    customers: Customers,
) -> None:
    customers.declare(backfill_registry)
    async with bare_serve(jobs, mode, backfill_registry) as mcp:
        # This client cannot be asked to confirm: the write is the call that carries the token.
        write = {"name": "normalize_emails", "write": True}
        refused = await mcp.fails("run_backfill", write, "CONFIRMATION_REQUIRED")
        confirmed = refused["next_call"]["arguments"]
        started = await mcp.ok("run_backfill", confirmed, meta={"traceparent": CALLER})
    assert (await jobs.get(started["start"]["job_id"])).traceparent == CALLER


async def test_the_first_attempt_joins_the_trace_and_a_retry_points_back_to_it(
    jobs: Jobs, app: JobRegistry, mode: str, clock: ManualClock
) -> None:
    seen: list[tuple[int, int | None, str | None]] = []

    @job(
        idempotency_key=lambda i: i.key,
        retry=Retry(attempts=2, backoff="fixed", base_delay=1),
        registry=app,
    )
    async def fails_once(input: Once, ctx: JobContext) -> None:
        inside = parse_traceparent(current_traceparent())
        seen.append((ctx.attempt, inside.trace_id if inside else None, ctx.traceparent))
        if ctx.attempt == 1:
            raise RuntimeError("transient")

    async with bare_serve(jobs, mode) as mcp:
        done = await mcp.ok(
            "enqueue_job",
            {"name": "fails_once", "input": {"key": "k"}},
            meta={"traceparent": CALLER},
        )
    worker = Worker(jobs)
    await worker.run_until_idle()
    clock.advance(1_000)
    await worker.run_until_idle()
    assert (await jobs.get(done["job_id"])).state == "done"
    # Each attempt's span continues the caller's trace under the caller's span.
    assert seen == [(1, TRACE_ID, CALLER), (2, TRACE_ID, CALLER)]


def test_the_servers_own_span_in_the_callers_trace_is_the_parent() -> None:
    server_span = parse_traceparent(SERVER_SPAN)
    assert server_span is not None
    ambient = trace.NonRecordingSpan(
        trace.SpanContext(
            server_span.trace_id,
            server_span.span_id,
            is_remote=False,
            trace_flags=trace.TraceFlags(1),
        )
    )
    with trace.use_span(ambient):
        # The SDK's span for this request continues the caller's trace: the job nests under it.
        assert request_traceparent({"traceparent": CALLER}) == SERVER_SPAN
        # A span of another trace is not the caller's: the caller's traceparent wins.
        assert request_traceparent({"traceparent": OTHER_TRACE}) == OTHER_TRACE
    assert request_traceparent({"traceparent": CALLER}) == CALLER
    assert request_traceparent(None) is None
    assert request_traceparent({}) is None
    assert request_traceparent({"traceparent": 42}) is None
    # A later version's extra fields are dropped: only version 00 is ever stored.
    later = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra"
    assert request_traceparent({"traceparent": later}) == CALLER
