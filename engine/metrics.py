"""Prometheus metrics for a worker: counters from its event feed, gauges from the driver's stats.

The gauges are the numbers `Jobs.stats()` returns — the same ones `queue_stats` and
`diagnose_queue` read — refreshed on an interval of the injected clock, so a dashboard, an
autoscaler and an agent never disagree. Rule 7 is what makes them worth having: a shed job stays
ready, so depth and oldest-ready age keep climbing exactly when the queue is saturated.

Each `WorkerMetrics` owns its own `CollectorRegistry` (never the process-global one), so two
workers or two tests in one process do not collide. Serve it with `serve_metrics(worker, port)`,
or mount `metrics.make_asgi_app()` / `make_wsgi_app()` in an app of your own and run
`metrics.keep_fresh(jobs)` beside it.
"""

from __future__ import annotations

import errno
import logging
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import SocketAttribute, SocketStream, TaskStatus
from anyio.streams.buffered import BufferedByteReceiveStream
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import make_asgi_app as _make_asgi_app
from prometheus_client import make_wsgi_app as _make_wsgi_app
from prometheus_client.exposition import choose_encoder

from engine import bounds
from engine.errors import FlagMend, InvalidArgumentError, JobsError
from engine.extras import this_python
from engine.observe import WorkerEvent
from engine.ports import free_port
from engine.pruner import PrunePass
from engine.shell_words import shell_word
from engine.worker import Worker
from engine.worker_presence import LIVE_WORKER_WINDOW_MS
from schemas.stats import QueueStats

if TYPE_CHECKING:
    from engine.client import Jobs

logger = logging.getLogger("mcp_jobs.metrics")

DEFAULT_NAMESPACE = "mcp_jobs"
# Loopback: the endpoint has no auth, so listening wider is the operator's choice.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_REFRESH_MS = 5_000
# Job bodies run from milliseconds to hours; the default client buckets stop at 10 s.
DURATION_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
)  # fmt: skip
# Socket I/O with a scraper is wall-clock work, not job time: these bound a stuck client.
REQUEST_TIMEOUT_S = 10.0
MAX_REQUEST_HEAD = 8192
METRICS_PATHS = ("/metrics", "/")


class MetricsPortUnavailableError(FlagMend):
    code = "METRICS_PORT_UNAVAILABLE"
    title = "the metrics endpoint could not listen on its port"
    # Not retryable, as HTTP_BIND_FAILED is not: the fix is another port or host, and a port
    # held by another process, a privileged one or an address not this machine's stays so.

    def __init__(self, host: str, port: int, reason: str, *, taken: bool = True) -> None:
        """`taken`: the port is held (or privileged); else the host is at fault."""
        if taken:
            # The worker command mends its --metrics-port to the free port; a program serving
            # metrics itself is told which port is free now.
            say = (
                f"import socket; s = socket.socket(); s.bind(({host!r}, 0)); "
                "print(s.getsockname()[1])"
            )
            why = "another process holds the port, or it is below 1024"
            self.flag, self.typed, self.nearest = "--metrics-port", port, free_port(host)
        else:
            # The worker command mends its --metrics-host to loopback; a program serving
            # metrics itself is shown the addresses this machine has.
            say = (
                'import socket; print(*sorted({"127.0.0.1", "0.0.0.0"} | {a[4][0] for a in '
                "socket.getaddrinfo(socket.gethostname(), None)}))"
            )
            why = "the host is not an address of this machine"
            self.flag, self.typed, self.nearest = "--metrics-host", host, DEFAULT_HOST
        super().__init__(
            f"cannot listen on {host}:{port} for metrics ({reason}); {why}",
            f"{this_python()} -c {shell_word(say)}",
            details={"host": host, "port": port},
        )


class WorkerMetrics:
    """The metric families of one worker, in a registry of their own. Call it with a
    `WorkerEvent` (it is a worker listener); `refresh`/`keep_fresh` set the queue gauges."""

    def __init__(
        self,
        *,
        registry: CollectorRegistry | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        buckets: Sequence[float] = DURATION_BUCKETS,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        ns = namespace
        job = ("queue", "name")

        def counter(name: str, doc: str, labels: Sequence[str] = job) -> Counter:
            return Counter(name, doc, labels, namespace=ns, registry=r)

        def gauge(name: str, doc: str, labels: Sequence[str] = ("queue",)) -> Gauge:
            return Gauge(name, doc, labels, namespace=ns, registry=r)

        self.started = counter("jobs_started", "Job runs started (claimed and body begun).")
        self.succeeded = counter("jobs_succeeded", "Job runs that completed.")
        self.retried = counter("jobs_retried", "Job runs that failed and were scheduled again.")
        self.dead_lettered = counter(
            "jobs_dead_lettered", "Jobs that used every attempt and are now dead."
        )
        self.failed = counter("jobs_failed", "Jobs failed for good without further attempts.")
        self.shed = counter(
            "jobs_shed",
            "Claims handed straight back because a concurrency cap was full (still ready).",
            (*job, "reason"),
        )
        self.rate_limited = counter(
            "jobs_rate_limited",
            "Claims handed straight back over a rate limit (still ready), by the limit's kind.",
            (*job, "limit"),
        )
        self.parked = counter(
            "jobs_parked",
            "Jobs suspended: a step.sleep, or a job name unknown here.",
            (*job, "reason"),
        )
        self.cancelled = counter("jobs_cancelled", "Running jobs stopped by an operator's cancel.")
        self.lease_lost = counter("jobs_lease_lost", "Runs abandoned because their lease was lost.")
        self.handed_back = counter("jobs_handed_back", "Runs handed back unharmed by a drain.")
        self.duration = Histogram(
            "job_run_duration_seconds",
            "Wall time of a job body, by job name.",
            job,
            namespace=ns,
            registry=r,
            buckets=tuple(buckets),
        )
        self.waited = Histogram(
            "job_wait_seconds",
            "Time from ready to start, by queue and priority: what priority buys.",
            ("queue", "priority"),
            namespace=ns,
            registry=r,
            buckets=tuple(buckets),
        )
        self.depth = gauge("queue_depth", "Jobs ready and due (a shed job counts here).")
        self.oldest_ready = gauge(
            "queue_oldest_ready_seconds", "Age of the oldest ready-and-due job; 0 when none."
        )
        self.dead = gauge("queue_dead_jobs", "Jobs in the dead letter state.")
        self.failed_jobs = gauge("queue_failed_jobs", "Jobs failed for good.")
        self.suspended = gauge("queue_suspended_jobs", "Jobs parked: sleeping or unknown name.")
        self.delayed = gauge("queue_delayed_jobs", "Jobs waiting for a later run time.")
        self.running = gauge("queue_running_jobs", "Jobs held by a worker right now.")
        self.expired_leases = gauge(
            "queue_expired_leases", "Running jobs whose lease ran out: their worker died."
        )
        self.workers_alive = Gauge(
            "workers_alive",
            f"Workers seen in the last {LIVE_WORKER_WINDOW_MS // 1000} s.",
            namespace=ns,
            registry=r,
        )
        self.refreshed_at = Gauge(
            "stats_refreshed_timestamp_seconds",
            "When the queue gauges were last read from the database (injected clock).",
            namespace=ns,
            registry=r,
        )
        self.refresh_errors = Counter(
            "stats_refresh_errors",
            "Failed reads of the queue stats; the gauges keep their last values meanwhile.",
            namespace=ns,
            registry=r,
        )
        self.pruned = counter("pruned_jobs", "Settled jobs deleted by retention.", ("state",))
        self._by_kind: dict[str, Callable[[WorkerEvent], None]] = {
            "claimed": self._started,
            "succeeded": lambda e: self.succeeded.labels(e.queue, e.name).inc(),
            "retried": lambda e: self.retried.labels(e.queue, e.name).inc(),
            "dead": lambda e: self.dead_lettered.labels(e.queue, e.name).inc(),
            "failed": lambda e: self.failed.labels(e.queue, e.name).inc(),
            # A shed is labelled by the kind of cap that was full, not the cap's key: the key
            # names a tenant, and a tenant id is an unbounded label value.
            "shed": self._shed,
            "parked": lambda e: self.parked.labels(e.queue, e.name, e.park_reason or "other").inc(),
            "cancelled": lambda e: self.cancelled.labels(e.queue, e.name).inc(),
            "lease_lost": lambda e: self.lease_lost.labels(e.queue, e.name).inc(),
            "handed_back": lambda e: self.handed_back.labels(e.queue, e.name).inc(),
        }
        self._queues: set[str] = set()
        self._refreshes = 0
        self._refreshed: anyio.Event | None = None

    def _started(self, event: WorkerEvent) -> None:
        self.started.labels(event.queue, event.name).inc()
        if event.waited_ms is not None:
            self.waited.labels(event.queue, str(event.priority or 0)).observe(
                event.waited_ms / 1000
            )

    def _shed(self, event: WorkerEvent) -> None:
        self.shed.labels(event.queue, event.name, event.cap_kind or "other").inc()
        if event.rate_kind is not None:
            # By kind (job, queue, tenant), not key: a computed key is unbounded app data.
            self.rate_limited.labels(event.queue, event.name, event.rate_kind).inc()

    # --- counters: the worker's event feed ----------------------------------------------------

    def __call__(self, event: WorkerEvent) -> None:
        count = self._by_kind.get(event.kind)
        if count is not None:
            count(event)
        if event.duration_ms is not None:
            self.duration.labels(event.queue, event.name).observe(event.duration_ms / 1000)

    def observe_prune(self, report: PrunePass) -> None:
        """Count what one prune pass deleted, per state (a pruner listener)."""
        for state, n in report.by_state().items():
            if n:
                self.pruned.labels(state).inc(n)

    # --- gauges: the driver's stats -----------------------------------------------------------

    def observe_stats(self, stats: Sequence[QueueStats], *, workers_alive: int, at_ms: int) -> None:
        """Publish one reading of `Jobs.stats()`. A queue that had rows before and has none now
        reads 0 rather than keeping its last values."""
        seen: set[str] = set()
        for s in stats:
            seen.add(s.queue)
            self._set_queue(s)
        for queue in self._queues - seen:
            self._set_queue(QueueStats(queue=queue))
        self._queues |= seen
        self.workers_alive.set(workers_alive)
        self.refreshed_at.set(at_ms / 1000)

    def _set_queue(self, s: QueueStats) -> None:
        q = s.queue
        self.depth.labels(q).set(s.ready)
        self.oldest_ready.labels(q).set(s.oldest_ready_ms / 1000)
        self.dead.labels(q).set(s.dead)
        self.failed_jobs.labels(q).set(s.failed)
        self.suspended.labels(q).set(s.suspended)
        self.delayed.labels(q).set(s.delayed)
        self.running.labels(q).set(s.running)
        self.expired_leases.labels(q).set(s.expired_leases)

    async def refresh(self, jobs: Jobs, queues: Sequence[str] | None = None) -> None:
        """Read `jobs.stats(queues)` and the live workers once and publish them."""
        now = jobs.clock.now_ms()
        stats = await jobs.stats(queues)
        workers = await jobs.driver.live_workers(now - LIVE_WORKER_WINDOW_MS)
        self.observe_stats(stats, workers_alive=len(workers), at_ms=now)
        self._refreshes += 1
        if self._refreshed is not None:
            self._refreshed.set()
            self._refreshed = None

    async def refresh_safely(self, jobs: Jobs, queues: Sequence[str] | None = None) -> bool:
        """`refresh`, but a database error is counted and logged instead of raised."""
        try:
            await self.refresh(jobs, queues)
        except JobsError as exc:
            self.refresh_errors.inc()
            logger.warning("queue gauges not refreshed: %s", exc)
            return False
        return True

    async def keep_fresh(
        self,
        jobs: Jobs,
        *,
        interval_ms: int = DEFAULT_REFRESH_MS,
        queues: Sequence[str] | None = None,
    ) -> None:
        """Refresh now and then every `interval_ms` of `jobs.clock`, until cancelled."""
        _check_interval(interval_ms)
        while True:
            await self.refresh_safely(jobs, queues)
            await jobs.clock.sleep_ms(interval_ms)

    @property
    def refreshes(self) -> int:
        """How many refreshes have completed."""
        return self._refreshes

    async def wait_refreshed(self, after: int) -> None:
        """Return once more than `after` refreshes have completed (bound it with fail_after)."""
        while self._refreshes <= after:
            if self._refreshed is None:
                self._refreshed = anyio.Event()
            await self._refreshed.wait()

    # --- exposition ---------------------------------------------------------------------------

    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """The registry in the format `accept` asks for (Prometheus text by default), and its
        content type."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type

    def make_asgi_app(self) -> Any:
        """An ASGI app serving this registry, to mount in a Starlette/FastAPI app."""
        return _make_asgi_app(self.registry)

    def make_wsgi_app(self) -> Any:
        """A WSGI app serving this registry."""
        return _make_wsgi_app(self.registry)


def _check_interval(interval_ms: int) -> None:
    if isinstance(interval_ms, bool) or not isinstance(interval_ms, int) or interval_ms < 1:
        raise InvalidArgumentError("interval_ms", interval_ms, "a whole number of ms ≥ 1")


_attached: weakref.WeakKeyDictionary[Worker, WorkerMetrics] = weakref.WeakKeyDictionary()


def instrument(worker: Worker, metrics: WorkerMetrics | None = None) -> WorkerMetrics:
    """The metrics listening to `worker`'s events, attached on first call (once per worker)."""
    existing = _attached.get(worker)
    if existing is not None:
        if metrics is not None and metrics is not existing:
            raise InvalidArgumentError("metrics", metrics, "the WorkerMetrics already attached")
        return existing
    metrics = metrics if metrics is not None else WorkerMetrics()
    worker.add_listener(metrics)
    if worker.pruner is not None:
        worker.pruner.add_listener(metrics.observe_prune)
    _attached[worker] = metrics
    return metrics


# --- the HTTP endpoint ------------------------------------------------------------------------


async def serve_metrics(
    worker: Worker,
    port: int,
    host: str = DEFAULT_HOST,
    *,
    interval_ms: int = DEFAULT_REFRESH_MS,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `worker`'s metrics at `http://host:port/metrics` and keep the queue gauges of every
    queue fresh, until cancelled. Port 0 picks a free port; `await tg.start(serve_metrics,
    worker, 0)` returns the bound one, and the worker's run may start then. The endpoint answers
    once the gauges are first read: after the worker's first check-in, so a fresh worker counts
    itself, or after `interval_ms` of its clock without one."""
    bounds.port("port", port)
    _check_interval(interval_ms)
    if not isinstance(host, str):
        raise InvalidArgumentError("host", host, "an IP address or host name of this machine")
    metrics = instrument(worker)
    try:
        listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    except OSError as exc:
        taken = exc.errno in (errno.EADDRINUSE, errno.EACCES)
        reason = exc.strerror or str(exc)
        raise MetricsPortUnavailableError(host, port, reason, taken=taken) from exc
    async with listener:
        bound: int = listener.extra(SocketAttribute.local_port)
        shown = f"[{host}]" if ":" in host else host
        logger.info("metrics at http://%s:%d/metrics", shown, bound)
        task_status.started(bound)
        await _checked_in(worker, interval_ms)
        # Every queue's, not only those this worker claims: a queue whose own workers all died
        # still has a depth, and the gauges of every worker agree (aggregate them with max).
        await metrics.refresh_safely(worker.jobs)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_refresh_after_first, metrics, worker, interval_ms)
            await listener.serve(lambda stream: _answer(metrics, stream))


async def _checked_in(worker: Worker, wait_ms: int) -> None:
    """Return at `worker`'s first check-in, or after `wait_ms` of its clock without one (a
    database that does not answer, or a worker whose run has not begun)."""
    async with anyio.create_task_group() as tg:

        async def give_up() -> None:
            await worker.clock.sleep_ms(wait_ms)
            tg.cancel_scope.cancel()

        tg.start_soon(give_up)
        await worker.presence.checked_in.wait()
        tg.cancel_scope.cancel()


async def _refresh_after_first(metrics: WorkerMetrics, worker: Worker, interval_ms: int) -> None:
    while True:
        await worker.clock.sleep_ms(interval_ms)
        await metrics.refresh_safely(worker.jobs)


async def _answer(metrics: WorkerMetrics, stream: SocketStream) -> None:
    """One request, one response, then close. Nothing a client sends can stop the server."""
    async with stream:
        try:
            with anyio.fail_after(REQUEST_TIMEOUT_S):
                reader = BufferedByteReceiveStream(stream)
                head = await reader.receive_until(b"\r\n\r\n", MAX_REQUEST_HEAD)
                status, body, content_type = _route(metrics, head)
                response = _response(status, body, content_type)
                if head.startswith(b"HEAD "):
                    response = response[: len(response) - len(body)]
                await stream.send(response)
        except Exception as exc:  # a scraper hanging up or sending junk is its problem
            logger.debug("metrics request dropped: %r", exc)


def _route(metrics: WorkerMetrics, head: bytes) -> tuple[str, bytes, str]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return "400 Bad Request", b"bad request\n", "text/plain; charset=utf-8"
    method, target = parts[0], parts[1]
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in lines[1:] if line)
    }
    if target.split("?", 1)[0] not in METRICS_PATHS:
        return "404 Not Found", b"metrics are at /metrics\n", "text/plain; charset=utf-8"
    if method not in ("GET", "HEAD"):
        return "405 Method Not Allowed", b"GET /metrics\n", "text/plain; charset=utf-8"
    body, content_type = metrics.exposition(headers.get("accept"))
    return "200 OK", body, content_type


def _response(status: str, body: bytes, content_type: str) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_REFRESH_MS",
    "LIVE_WORKER_WINDOW_MS",
    "MetricsPortUnavailableError",
    "WorkerMetrics",
    "instrument",
    "serve_metrics",
]
