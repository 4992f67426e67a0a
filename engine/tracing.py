"""W3C trace context for jobs: the enqueuer's `traceparent` is stored with the job, and the run
continues that trace.

OpenTelemetry is optional. When `opentelemetry-api` is importable, `enqueue` takes the
traceparent of the current span unless one is passed, and the job body runs inside a CONSUMER
span whose parent is the stored traceparent, so anything the body traces joins the enqueuer's
trace. Without it, a traceparent is still validated, stored and handed to the body as
`ctx.traceparent`, and the run adds no work at all.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from engine.errors import InvalidArgumentError
from engine.redaction import scrubbed
from schemas.jobs import JobRecord

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace as otel_trace
except ImportError:  # pragma: no cover - exercised only where opentelemetry-api is absent
    otel_context = None  # type: ignore[assignment]
    otel_trace = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from contextvars import Token

    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

OTEL_AVAILABLE = otel_trace is not None
TRACER_NAME = "mcp_jobs"

# version 00 is exact; a later version may append fields after the flags (W3C trace-context §3.2.4),
# as header text: visible ASCII, and (W3C's bound for tracestate) at most 512 characters in all.
_TRACEPARENT = re.compile(
    r"(?P<version>[0-9a-f]{2})-(?P<trace_id>[0-9a-f]{32})-(?P<span_id>[0-9a-f]{16})"
    r"-(?P<flags>[0-9a-f]{2})(?P<rest>-[\x21-\x7e]*)?"
)
_MAX_CHARS = 512
_EXPECTED = (
    "a W3C traceparent: 00-<32 lowercase hex trace id>-<16 hex span id>-<2 hex flags> "
    f"(a later version may add fields of visible ASCII, {_MAX_CHARS} characters in all)"
)
# The one mend that holds whatever was passed: no traceparent, so the current span's or none.
_FIX = "pass traceparent=None: the job then continues the current span's trace, if any"
SAMPLED = 0x01


@dataclass(frozen=True)
class TraceParent:
    """A parsed W3C `traceparent` header."""

    trace_id: int
    span_id: int
    flags: int = SAMPLED
    version: int = 0

    @property
    def sampled(self) -> bool:
        return bool(self.flags & SAMPLED)

    @property
    def trace_id_hex(self) -> str:
        return f"{self.trace_id:032x}"

    @property
    def span_id_hex(self) -> str:
        return f"{self.span_id:016x}"

    def format(self) -> str:
        # We only ever write version 00: a later version's extra fields are not ours to echo.
        return format_traceparent(self.trace_id, self.span_id, self.flags)


def format_traceparent(trace_id: int, span_id: int, flags: int = SAMPLED) -> str:
    """`00-<trace id>-<span id>-<flags>`; refuses the all-zero ids the spec calls invalid."""
    if not 0 < trace_id < 1 << 128:
        raise InvalidArgumentError("trace_id", trace_id, "a non-zero 128-bit integer")
    if not 0 < span_id < 1 << 64:
        raise InvalidArgumentError("span_id", span_id, "a non-zero 64-bit integer")
    if not 0 <= flags <= 0xFF:
        raise InvalidArgumentError("flags", flags, "an 8-bit integer")
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def parse_traceparent(value: object) -> TraceParent | None:
    """The parsed header, or None when `value` is not a valid traceparent (the spec's advice to
    a receiver: ignore a malformed one and start afresh)."""
    if not isinstance(value, str) or len(value) > _MAX_CHARS:
        return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return None
    version = int(match["version"], 16)
    if version == 0xFF or (version == 0 and match["rest"] is not None):
        return None
    trace_id = int(match["trace_id"], 16)
    span_id = int(match["span_id"], 16)
    if trace_id == 0 or span_id == 0:
        return None
    return TraceParent(trace_id, span_id, int(match["flags"], 16), version)


def require_traceparent(value: object) -> str:
    """`value` as stored with a job: a valid traceparent written as version 00 (what the MCP
    path stores too), else `InvalidArgumentError` (INVALID_ARGUMENT) naming `traceparent`. The
    same on every driver: nothing a database could refuse or hold in bulk gets past it."""
    parsed = parse_traceparent(value)
    if parsed is None:
        raise InvalidArgumentError("traceparent", value, _EXPECTED, fix=_FIX)
    return value if parsed.version == 0 and isinstance(value, str) else parsed.format()


def current_traceparent() -> str | None:
    """The traceparent of the current OpenTelemetry span; None without OpenTelemetry or a span."""
    if otel_trace is None:
        return None
    if not otel_context.get_current():
        # An empty context holds no span: the untraced enqueue is answered by one contextvar
        # read instead of building the invalid span's context to learn the same.
        return None
    span_context = otel_trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return None
    return format_traceparent(span_context.trace_id, span_context.span_id, span_context.trace_flags)


# --- the run's span ---------------------------------------------------------------------------


class RunSpan:
    """The span around one job body. This base is the no-op used without OpenTelemetry: one
    shared instance, so a run without tracing allocates nothing."""

    def __enter__(self) -> RunSpan:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def failed(self, error: BaseException) -> None:
        """Mark the run failed: the body raised `error` (a suspension is not a failure)."""
        return None


_NO_SPAN = RunSpan()
_tracer: Tracer | None = None


def _get_tracer() -> Tracer:
    global _tracer
    if _tracer is None:
        assert otel_trace is not None
        # A ProxyTracer until the application installs a provider; it follows the provider after.
        _tracer = otel_trace.get_tracer(TRACER_NAME)
    return _tracer


class _OtelRunSpan(RunSpan):
    def __init__(self, record: JobRecord) -> None:
        self._record = record
        self._span: Span | None = None
        self._token: Token[Context] | None = None

    def __enter__(self) -> RunSpan:
        assert otel_trace is not None and otel_context is not None
        record = self._record
        parent = parse_traceparent(record.traceparent)
        parent_context = None
        if parent is not None:
            remote = otel_trace.SpanContext(
                trace_id=parent.trace_id,
                span_id=parent.span_id,
                is_remote=True,
                trace_flags=otel_trace.TraceFlags(parent.flags),
            )
            parent_context = otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(remote))
        attributes: dict[str, Any] = {
            "messaging.system": "mcp_jobs",
            "messaging.operation.type": "process",
            "messaging.destination.name": record.queue,
            "messaging.message.id": record.id,
            "mcp_jobs.job.name": record.name,
            "mcp_jobs.job.run_id": record.run_id,
            "mcp_jobs.job.attempt": record.attempt,
        }
        if record.tenant_id is not None:
            attributes["mcp_jobs.tenant_id"] = record.tenant_id
        self._span = _get_tracer().start_span(
            f"process {record.name}",
            context=parent_context,
            kind=otel_trace.SpanKind.CONSUMER,
            attributes=attributes,
        )
        self._token = otel_context.attach(otel_trace.set_span_in_context(self._span))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert otel_context is not None and self._span is not None and self._token is not None
        otel_context.detach(self._token)
        self._span.end()

    def failed(self, error: BaseException) -> None:
        assert otel_trace is not None and self._span is not None
        # The SDK would record the raw message and stack: mask credentials as the stored error is.
        self._span.record_exception(
            error,
            attributes={
                "exception.message": scrubbed(str(error)),
                "exception.stacktrace": scrubbed("".join(traceback.format_exception(error))),
            },
        )
        self._span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, type(error).__name__))


def run_span(record: JobRecord) -> RunSpan:
    """A context manager for the job body: a span continuing `record.traceparent` when
    OpenTelemetry is importable, else a shared no-op.

    Also the shared no-op when no tracer provider is installed and the job carries no
    traceparent: the default tracer would only hand back the span already current, so the body
    would see nothing different, and a span costs a context attach per job."""
    if otel_trace is None:
        return _NO_SPAN
    if record.traceparent is None and isinstance(
        otel_trace.get_tracer_provider(), otel_trace.ProxyTracerProvider
    ):
        return _NO_SPAN
    return _OtelRunSpan(record)


__all__ = [
    "OTEL_AVAILABLE",
    "RunSpan",
    "TraceParent",
    "current_traceparent",
    "format_traceparent",
    "parse_traceparent",
    "require_traceparent",
    "run_span",
]
