"""What `Worker(...)` takes, refused at construction: its numbers, queues and id within their
bounds (`engine.bounds`), and each other argument of the kind it is declared."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from engine import bounds
from engine.claim_plan import PREFETCH_PER_SLOT
from engine.errors import InvalidArgumentError
from engine.limits import Limits
from engine.observe import WorkerEventListener
from engine.retention import Retention

if TYPE_CHECKING:
    from engine.declare import JobDefinition

# The shortest lease a worker takes. Its heartbeat renews every third of a lease (worker_leases):
# below a second, one slow write or pause of the loop lets a lease lapse and the job run twice.
MIN_LEASE_MS = 1_000
# `queues="*"`: claim from every queue, whatever jobs this worker knows.
ALL_QUEUES = "*"

QueueChoice = Sequence[str] | Literal["*"] | None

_LISTENERS = "callables taking a WorkerEvent"


def counts_checked(
    concurrency: int,
    queues: QueueChoice,
    lease_ms: int,
    poll_ms: int,
    drain_ms: int,
    prefetch: int | None,
    worker_id: str | None,
) -> tuple[int, QueueChoice]:
    """The numbers, queues and id within their bounds; answers the prefetch (None: as many as
    PREFETCH_PER_SLOT a slot) and the queues chosen (a list is copied)."""
    bounds.cap("concurrency", concurrency)
    # Each is a time it waits, or a lease it writes: within the range any stored time is.
    bounds.whole("lease_ms", lease_ms, MIN_LEASE_MS, bounds.MAX_DELAY_MS, "ms")
    bounds.whole("poll_ms", poll_ms, 1, bounds.MAX_DELAY_MS, "ms")
    bounds.whole("drain_ms", drain_ms, 0, bounds.MAX_DELAY_MS, "ms")
    if prefetch is None:
        prefetch = PREFETCH_PER_SLOT * concurrency
    bounds.whole("prefetch", prefetch, 0, PREFETCH_PER_SLOT * bounds.MAX_CAP)
    # A number, bytes or a mapping is no list of names either: refused here, not as the
    # TypeError of the loop below (nor a dict's keys taken for names).
    if (isinstance(queues, str) and queues != ALL_QUEUES) or not (
        queues is None
        or isinstance(queues, str)
        or (isinstance(queues, Iterable) and not isinstance(queues, bytes | Mapping))
    ):
        raise InvalidArgumentError("queues", queues, 'a list of queue names, or "*"')
    # No queues claims nothing, ever: left out, it claims the registered jobs' queues.
    bounds.narrowing("queues", queues, "the queues of the registered jobs")
    if queues is not None and queues != ALL_QUEUES:
        for queue in queues:
            bounds.text("queues", queue, bounds.MAX_QUEUE_BYTES)
    bounds.optional_actor("worker_id", worker_id)  # in logs and on every job it holds
    return prefetch, queues if queues is None or queues == ALL_QUEUES else [*queues]


def claimed_queues(choice: QueueChoice, registry: Iterable[JobDefinition[Any]]) -> list[str] | None:
    """The queues a worker of this `queues=` choice claims (None: every queue): the named
    ones, or those of the jobs registered with it."""
    if choice == ALL_QUEUES:
        return None
    if choice is None:
        return sorted({definition.queue for definition in registry})
    return list(choice)


def client_checked(jobs: object) -> None:
    """INVALID_ARGUMENT unless `jobs` is a client (read by what a worker uses of it: a URL or
    None was an AttributeError on `.driver`)."""
    if not all(hasattr(jobs, part) for part in ("driver", "clock", "registry", "settler")):
        raise InvalidArgumentError(
            "jobs",
            jobs,
            "the Jobs client `await connect(...)` returns",
            fix="worker = Worker(await connect(url))",
        )


def kinds_checked(
    listeners: object,
    limits: object,
    retention: object,
    apps: object,
    *flags: object,
) -> tuple[list[WorkerEventListener], list[str] | None]:
    """Each argument of the kind it is declared, so that a wrong one is INVALID_ARGUMENT here,
    not an AttributeError when the worker first uses it ("yes" for a flag is a mistake too);
    the listeners and apps as lists (a generator is read once)."""
    if isinstance(listeners, str | bytes) or not isinstance(listeners, Iterable):
        raise InvalidArgumentError("listeners", listeners, f"a list of {_LISTENERS}")
    listed = list(listeners)
    for listener in listed:
        if not callable(listener):
            raise InvalidArgumentError("listeners", listener, _LISTENERS)
    if limits is not None and not isinstance(limits, Limits):
        raise InvalidArgumentError("limits", limits, "a Limits(...) or None")
    if retention is not None and not isinstance(retention, Retention):
        raise InvalidArgumentError("retention", retention, "a Retention(...) or None")
    modules = None
    if apps is not None:
        # A module name given alone would be read as a list of one-letter modules.
        if isinstance(apps, str | bytes) or not isinstance(apps, Iterable):
            raise InvalidArgumentError("apps", apps, "a list of module names, or None")
        modules = [bounds.text("apps", app, bounds.MAX_NAME_BYTES) for app in apps]
    for name, flag in zip(("scheduler", "outbox_relay", "prune"), flags, strict=True):
        if flag is not None:
            bounds.flag(name, flag)
    return listed, modules
