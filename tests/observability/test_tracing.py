"""Trace propagation: the enqueuer's W3C traceparent is stored with the job, reaches the run's
context, and (with OpenTelemetry) the run's span continues that trace."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Retry, Worker, job
from engine.errors import JobsError
from engine.tracing import (
    current_traceparent,
    format_traceparent,
    parse_traceparent,
    require_traceparent,
)

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
SPAN_ID = 0x00F067AA0BA902B7
PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class Item(BaseModel):
    n: int


def test_a_traceparent_parses_and_formats_back() -> None:
    parsed = parse_traceparent(PARENT)
    assert parsed is not None
    assert (parsed.trace_id, parsed.span_id, parsed.sampled) == (TRACE_ID, SPAN_ID, True)
    assert parsed.format() == PARENT
    assert format_traceparent(TRACE_ID, SPAN_ID, 0) == PARENT[:-2] + "00"
    # A later version may carry more fields; we read the ones we know and write version 00.
    future = parse_traceparent("cc-" + PARENT[3:] + "-extra")
    assert future is not None and future.version == 0xCC and future.format() == PARENT


@pytest.mark.parametrize(
    "bad",
    [
        PARENT.upper(),  # the spec requires lowercase hex
        "00-" + "0" * 32 + "-00f067aa0ba902b7-01",  # all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01",  # all-zero span id
        "ff" + PARENT[2:],  # version ff is forbidden
        PARENT + "-extra",  # version 00 has exactly four fields
        PARENT[:-1],
        "",
        "not a traceparent",
        42,
        None,
    ],
)
def test_a_malformed_traceparent_is_refused(bad: object) -> None:
    assert parse_traceparent(bad) is None
    with pytest.raises(JobsError) as raised:
        require_traceparent(bad)
    assert raised.value.code == "INVALID_ARGUMENT"


def test_formatting_refuses_invalid_ids() -> None:
    for trace_id, span_id in [(0, SPAN_ID), (TRACE_ID, 0), (1 << 128, SPAN_ID)]:
        with pytest.raises(JobsError) as raised:
            format_traceparent(trace_id, span_id)
        assert raised.value.code == "INVALID_ARGUMENT"


async def test_a_traceparent_given_at_enqueue_reaches_the_run(
    jobs: Jobs, registry: JobRegistry
) -> None:
    seen: list[str | None] = []

    @job(idempotency_key=lambda i: f"i:{i.n}", registry=registry)
    async def traced(input: Item, ctx: JobContext) -> None:
        seen.append(ctx.traceparent)

    given = await jobs.enqueue(traced, {"n": 1}, traceparent=PARENT)
    plain = await jobs.enqueue(traced, {"n": 2})
    assert (await jobs.get(given.id)).traceparent == PARENT
    assert (await jobs.get(plain.id)).traceparent is None  # no span current, none given
    await Worker(jobs).run_until_idle()
    assert sorted(seen, key=str) == sorted([PARENT, None], key=str)


async def test_a_malformed_traceparent_is_refused_at_enqueue(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: f"i:{i.n}", registry=registry)
    async def traced(input: Item, ctx: JobContext) -> None:
        return None

    with pytest.raises(JobsError) as raised:
        await jobs.enqueue(traced, {"n": 1}, traceparent="00-nope")
    assert raised.value.code == "INVALID_ARGUMENT"
    assert (await jobs.list()).jobs == []


FUTURE = "cc-" + PARENT[3:]  # a later version: ids read, what follows the flags not ours


@pytest.mark.parametrize(
    "bad",
    [
        FUTURE + "-" + "x" * 5_000_000,  # past any header: the input payload is capped too
        FUTURE + "-a\x00b",  # a NUL PostgreSQL cannot store
        FUTURE + "-\ud800",  # a lone surrogate SQLite and PostgreSQL cannot store
        FUTURE + "-caf\u00e9",  # a header is ASCII
        FUTURE + "-a b",
    ],
)
async def test_a_traceparent_is_refused_the_same_on_every_driver_naming_it(
    jobs: Jobs, registry: JobRegistry, bad: str
) -> None:
    @job(idempotency_key=lambda i: f"i:{i.n}", registry=registry)
    async def traced(input: Item, ctx: JobContext) -> None:
        return None

    assert parse_traceparent(bad) is None  # the MCP path ignores it by the same rule
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue(traced, {"n": 1}, traceparent=bad)
    error = raised.value
    assert error.code == "INVALID_ARGUMENT" and not error.retryable
    assert error.details["argument"] == "traceparent"
    assert len(error.cause) < 1000  # the value is cut short, not carried whole
    assert "traceparent=None" in error.fix  # a fix the caller can make as written
    assert (await jobs.list()).jobs == []
    # Passing what the fix says is accepted.
    await jobs.enqueue(traced, {"n": 1}, traceparent=None)


async def test_a_later_versions_traceparent_is_stored_as_version_00(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: f"i:{i.n}", registry=registry)
    async def traced(input: Item, ctx: JobContext) -> None:
        return None

    made = await jobs.enqueue(traced, {"n": 1}, traceparent=FUTURE + "-0f-extra")
    # As the MCP path stores a request's traceparent: the fields we know, written as version 00.
    assert (await jobs.get(made.id)).traceparent == PARENT


async def test_with_opentelemetry_the_run_continues_the_enqueuers_trace(
    jobs: Jobs, registry: JobRegistry
) -> None:
    trace = pytest.importorskip("opentelemetry.trace")
    inside: list[tuple[int, str | None]] = []

    @job(idempotency_key=lambda i: f"i:{i.n}", registry=registry)
    async def traced(input: Item, ctx: JobContext) -> None:
        span_context = trace.get_current_span().get_span_context()
        inside.append((span_context.trace_id, current_traceparent()))

    enqueuer = trace.NonRecordingSpan(
        trace.SpanContext(TRACE_ID, SPAN_ID, is_remote=False, trace_flags=trace.TraceFlags(1))
    )
    assert current_traceparent() is None
    with trace.use_span(enqueuer):
        # No traceparent passed: enqueue takes the current span's.
        r = await jobs.enqueue(traced, {"n": 1})
    assert (await jobs.get(r.id)).traceparent == PARENT
    await Worker(jobs).run_until_idle()
    ((trace_id, inner),) = inside
    assert trace_id == TRACE_ID
    parsed = parse_traceparent(inner)
    assert parsed is not None and parsed.trace_id == TRACE_ID
    # The span is gone once the body returns: nothing leaks into the worker's own context.
    assert current_traceparent() is None


async def test_a_failed_runs_span_records_the_exception_with_credentials_masked(
    jobs: Jobs, registry: JobRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = pytest.importorskip("opentelemetry.trace")
    import engine.tracing as tracing

    recorded: list[tuple[BaseException, dict[str, object]]] = []

    class _Span(trace.NonRecordingSpan):
        def record_exception(self, exception, attributes=None, timestamp=None, escaped=False):  # type: ignore[no-untyped-def]
            recorded.append((exception, dict(attributes or {})))

    class _Tracer(trace.NoOpTracer):
        def start_span(self, name, context=None, *args, **kwargs):  # type: ignore[no-untyped-def]
            return _Span(trace.INVALID_SPAN_CONTEXT)

    class _Provider(trace.NoOpTracerProvider):
        def get_tracer(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            return _Tracer()

    # An application's provider, as `set_tracer_provider` would install it (which refuses a second).
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", _Provider())
    monkeypatch.setattr(tracing, "_tracer", None)

    @job(idempotency_key=lambda i: f"i:{i.n}", registry=registry, retry=Retry(attempts=1))
    async def leaky(input: Item, ctx: JobContext) -> None:
        raise RuntimeError("connect to postgresql://app:hunter2@db.internal/prod failed")

    await jobs.enqueue(leaky, {"n": 1})
    await Worker(jobs).run_until_idle()
    ((exception, attributes),) = recorded
    assert isinstance(exception, RuntimeError)
    assert "hunter2" not in str(attributes["exception.message"])
    assert "hunter2" not in str(attributes["exception.stacktrace"])
    assert "db.internal/prod" in str(attributes["exception.message"])
