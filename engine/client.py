"""The jobs client: what application code and the MCP server call. `jobs = await connect(url)`."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError

from engine import bounds, paging
from engine import inbound_events as event_rules
from engine import pauses as pause_rules
from engine.bounds import (
    MAX_ACTOR_BYTES,
    MAX_DELAY_MS,
    MAX_DELAY_SECONDS,
    MAX_ID_BYTES,
    MAX_KEY_BYTES,
    MAX_NAME_BYTES,
    MAX_PAGE,
    MAX_QUEUE_BYTES,
    MAX_QUEUES,
    MAX_TENANT_BYTES,
)
from engine.clock import Clock
from engine.declare import JobDefinition, JobRegistry, default_registry
from engine.descriptors import IdempotencyKeyMissingError, from_registry, judged, validate_input
from engine.drivers import open_driver
from engine.drivers.base import (
    DESCRIPTORS,
    EVENTS,
    PAUSES,
    RERUNS,
    DescriptorStore,
    Driver,
    PauseStore,
    require,
)
from engine.errors import (
    InvalidArgumentError,
    JobDuplicateError,
    JobInputInvalidError,
    JobTenantRequiredError,
    JobUnknownError,
)
from engine.ids import new_ids
from engine.inbound_events import (
    DEFAULT_EVENT_WINDOW_MS,
    EventSent,
    InboundEvent,
    checked_window_ms,
)
from engine.outbox import StagedJob
from engine.retry import retry_schedule
from engine.settle import Settler
from engine.tracing import current_traceparent, require_traceparent
from schemas.descriptor import JobDescriptor
from schemas.errors import NextCall
from schemas.events import EventRecord
from schemas.jobs import EnqueueRequest, EnqueueResult, JobFilter, JobPage, JobRecord, OnConflict
from schemas.pauses import Pause
from schemas.states import JOB_STATES, JobState
from schemas.stats import QueueStats
from schemas.steps import StepRecord
from schemas.trace import JobTrace, TraceQuery

JobRef = str | JobDefinition[Any]

# Parts of a large batch (see `Jobs._parts`): the first is small so that the database starts
# inserting early; each next part is built while the previous one is inserted, and building a
# row costs about half what inserting it does, so a part may be twice the size of the last.
_FIRST_PART = 128
_LARGEST_PART = 1024
_DEFAULT_LIST_PAGE = 50
# `Jobs.select` reads at most this many rows by default: a bulk action's plan costs a bounded
# read even when the database's filters (name, queue, tenant, state) leave a long history.
SELECT_SCAN_LIMIT = 20_000
# An epoch-ms window bound beyond this is no instant a row holds (JavaScript's safe integer).
_MAX_EPOCH_MS = 2**53 - 1


class Enqueue(NamedTuple):
    """One item of `enqueue_many`. A named tuple: immutable, and built several times faster
    than a frozen dataclass, which matters at a thousand items per call."""

    job: JobRef
    input: BaseModel | Mapping[str, Any]
    tenant_id: str | None = None
    delay: float | None = None
    run_at: int | None = None
    on_conflict: OnConflict = "dedupe"
    traceparent: str | None = None
    # None: the job's declared priority (engine.rules.claim_rank; higher is claimed first).
    priority: int | None = None


def _item(index: int, item: object) -> Enqueue:
    """Item `index` of a batch as an `Enqueue`; anything else is refused by its position."""
    if isinstance(item, tuple) and 2 <= len(item) <= len(Enqueue._fields):
        return Enqueue(*item)
    raise InvalidArgumentError(f"items[{index}]", item, "Enqueue(job, input, ...)")


def _addressed(job_id: object, tenant_id: object) -> tuple[str, str | None]:
    """The job id and tenant scope of an id-addressed call, within bounds."""
    return (
        bounds.text("job_id", job_id, MAX_ID_BYTES),
        bounds.optional_text("tenant_id", tenant_id, MAX_TENANT_BYTES),
    )


def _list_arguments(wanted: JobFilter) -> dict[str, Any]:
    """The list_jobs arguments that ask for `wanted` (its cursor aside), defaults left out."""
    arguments: dict[str, Any] = {}
    if wanted.states is not None:
        arguments["state"] = wanted.states[0] if len(wanted.states) == 1 else list(wanted.states)
    for key in ("name", "queue", "tenant_id"):
        if getattr(wanted, key) is not None:
            arguments[key] = getattr(wanted, key)
    if wanted.limit != _DEFAULT_LIST_PAGE:
        arguments["limit"] = wanted.limit
    return arguments


def _field_errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False, include_context=False, include_input=False)
    ]


def _scheduled(
    name: str, tenant_required: bool, item: Enqueue, enqueued_by: str | None, now: int
) -> int:
    """The item's checks that do not depend on its input (tenant, conflict mode, actor), and
    when it runs: now, `delay` seconds from now, or `run_at`, within bounds."""
    _, _, tenant, delay, run_at, on_conflict, _, _ = item
    if tenant is None:
        if tenant_required:
            raise JobTenantRequiredError(name)
    else:
        bounds.text("tenant_id", tenant, MAX_TENANT_BYTES)
    if on_conflict != "dedupe" and on_conflict != "error":
        raise InvalidArgumentError("on_conflict", on_conflict, "'dedupe' or 'error'")
    if delay is None and run_at is None:
        run_at = now
    elif delay is not None:
        if run_at is not None:
            raise InvalidArgumentError("delay", delay, "omitted when run_at is given")
        seconds = bounds.number("delay", delay, 0, MAX_DELAY_SECONDS, whole=False)
        run_at = now + int(seconds * 1000)
    else:
        run_at = bounds.whole("run_at", run_at, 0, now + MAX_DELAY_MS, "epoch milliseconds")
    if enqueued_by is not None:
        bounds.text("enqueued_by", enqueued_by, MAX_ACTOR_BYTES)
    return run_at


class JobSelection(NamedTuple):
    """What `Jobs.select` found: the matching jobs, newest first, and whether it stopped short."""

    jobs: builtins.list[JobRecord]
    # A job past `limit` matched too: the selection is not every match.
    more: bool
    # Rows read to find them.
    scanned: int
    # The read stopped at `scan_limit` rows before the end: matches may lie beyond.
    scan_capped: bool


def _matches(job: JobRecord, error_code: str | None, after: int | None, before: int | None) -> bool:
    if error_code is not None and (job.last_error is None or job.last_error.code != error_code):
        return False
    if after is not None and job.updated_at < after:
        return False
    return before is None or job.updated_at < before


class Jobs:
    """A connected jobs client over one driver and one registry of declarations."""

    def __init__(
        self,
        driver: Driver,
        *,
        registry: JobRegistry | None = None,
        clock: Clock | None = None,
        max_payload_bytes: int | None = None,
        event_window: float | None = None,
    ) -> None:
        self.driver = driver
        self.registry = registry if registry is not None else default_registry
        self.clock = clock or driver.clock
        # The largest input (compact UTF-8 JSON) an enqueue accepts; MCP_JOBS_MAX_PAYLOAD_BYTES.
        self.max_payload_bytes = bounds.payload_limit(max_payload_bytes)
        # Every settle (ack) and step save goes through here, group-committed across jobs.
        self.settler = Settler(driver)
        # How long an event this client sends stays matchable by a wait that starts later, in
        # ms (engine/inbound_events.py): seconds given, 24 h by default.
        self.event_window_ms = (
            DEFAULT_EVENT_WINDOW_MS if event_window is None else checked_window_ms(event_window)
        )
        # Whether this client staged a job (engine/outbox.py), and who to tell the first time:
        # a worker starts its outbox relay then.
        self.outbox_in_use = False
        self._first_stage: builtins.list[Callable[[], None]] = []
        # Where workers published their jobs' descriptors (engine.descriptors): a job this
        # process has not imported is described and enqueued by them. None: the driver keeps none.
        self.descriptors: DescriptorStore | None = (
            require(driver, DESCRIPTORS) if DESCRIPTORS.offered_by(driver) else None
        )

    # --- enqueue ------------------------------------------------------------------------------

    def _requests(
        self, items: Sequence[Enqueue], enqueued_by: str | None, now: int | None = None
    ) -> builtins.list[EnqueueRequest]:
        """Validate and resolve every item. One clock reading (`now`, else the clock's) and one
        look at the current span serve the whole call: one instant, one span."""
        at = self.clock.now_ms() if now is None else now
        return self._build(items, enqueued_by, at, current_traceparent())

    def _build(
        self, items: Sequence[Enqueue], enqueued_by: str | None, now: int, ambient: str | None
    ) -> builtins.list[EnqueueRequest]:
        ids = new_ids(2 * len(items))
        return [
            self._request(
                item if type(item) is Enqueue else _item(i, item),
                enqueued_by,
                now,
                ambient,
                ids[2 * i],
                ids[2 * i + 1],
            )
            for i, item in enumerate(items)
        ]

    def _parts(
        self, items: Sequence[Enqueue], enqueued_by: str | None, now: int
    ) -> Iterator[builtins.list[EnqueueRequest]]:
        """`_requests` in parts that double in size, each built only when the driver asks for
        it (see `Driver.enqueue_parts`); one instant (the driver's too) and one span for all."""
        ambient = current_traceparent()
        start, size = 0, _FIRST_PART
        while start < len(items):
            yield self._build(items[start : start + size], enqueued_by, now, ambient)
            start += size
            size = min(2 * size, _LARGEST_PART)

    def _request(
        self,
        item: Enqueue,
        enqueued_by: str | None,
        now: int,
        ambient: str | None,
        job_id: str,
        run_id: str,
    ) -> EnqueueRequest:
        """One item resolved into the request a driver inserts (`ambient`: the current span's
        traceparent, used when the item names none)."""
        # The hot path of every enqueue: one pass, the common case (no delay, no tenant) first.
        # Every value is checked against engine.bounds here, before any driver sees it.
        job, input, tenant, _, _, on_conflict, traceparent, priority = item
        definition = job if isinstance(job, JobDefinition) else self._definition(job)
        try:
            value = definition.parse_input(input)
        except ValidationError as exc:
            raise JobInputInvalidError(definition.name, _field_errors(exc)) from exc
        run_at = _scheduled(definition.name, definition.tenant_required, item, enqueued_by, now)
        key = definition.key_for(value)
        dumped = value.model_dump(mode="json")
        bounds.payload("input", dumped, self.max_payload_bytes)
        return EnqueueRequest(
            id=job_id,
            run_id=run_id,
            name=definition.name,
            queue=definition.queue,
            idempotency_key=key,
            input=dumped,
            run_at=run_at,
            max_attempts=definition.retry.attempts,
            tenant_id=tenant,
            timeout_ms=definition.timeout_ms,
            on_conflict=on_conflict,
            traceparent=ambient if traceparent is None else require_traceparent(traceparent),
            enqueued_by=enqueued_by,
            priority=definition.priority
            if priority is None
            else bounds.priority("priority", priority),
        )

    async def _published_request(
        self,
        store: DescriptorStore,
        item: Enqueue,
        key: object,
        enqueued_by: str | None,
        now: int,
        job_id: str,
        run_id: str,
    ) -> EnqueueRequest:
        """One item of a job this process has not imported, resolved against the descriptor a
        worker published: its input validated with the published JSON Schema, its key the
        caller's (the key function is the app's code; engine/descriptors.py)."""
        job, input, tenant, _, _, on_conflict, traceparent, priority = item
        name = bounds.text("job", job, MAX_NAME_BYTES)
        found = await store.published_descriptors(name)
        if not found:
            raise JobUnknownError(name, await self._known_names(store))
        descriptor = found[0]
        value = validate_input(
            descriptor, input.model_dump(mode="json") if isinstance(input, BaseModel) else input
        )
        run_at = _scheduled(name, descriptor.tenant_required, item, enqueued_by, now)
        if key is None:
            raise IdempotencyKeyMissingError(name, descriptor.apps or [], value)
        bounds.payload("input", value, self.max_payload_bytes)
        return EnqueueRequest(
            id=job_id,
            run_id=run_id,
            name=name,
            queue=descriptor.queue,
            idempotency_key=bounds.text("key", key, MAX_KEY_BYTES),
            input=value,
            run_at=run_at,
            max_attempts=descriptor.retry.attempts,
            tenant_id=tenant,
            timeout_ms=descriptor.timeout_ms,
            on_conflict=on_conflict,
            traceparent=current_traceparent()
            if traceparent is None
            else require_traceparent(traceparent),
            enqueued_by=enqueued_by,
            priority=descriptor.priority
            if priority is None
            else bounds.priority("priority", priority),
        )

    async def _known_names(self, store: DescriptorStore) -> builtins.list[str]:
        """Every job name this client can enqueue: registered here, or published."""
        published = [d.name for d in await store.published_descriptors()]
        return sorted({*self.registry.names(), *published})

    def _definition(self, job: object, argument: str = "job") -> JobDefinition[Any]:
        """The declaration named `job`; a name that no declaration could have is refused as an
        argument (a declared name is always within bounds, so a hit skips the check)."""
        found = self.registry.get(job) if isinstance(job, str) else None
        if found is not None:
            return found
        return self.registry.require(bounds.text(argument, job, MAX_NAME_BYTES))

    async def enqueue(
        self,
        job: JobRef,
        input: BaseModel | Mapping[str, Any],
        *,
        tenant_id: str | None = None,
        delay: float | None = None,
        run_at: int | None = None,
        on_conflict: OnConflict = "dedupe",
        traceparent: str | None = None,
        enqueued_by: str | None = None,
        key: str | None = None,
        priority: int | None = None,
    ) -> EnqueueResult:
        """Enqueue one job. A job this process has not imported is enqueued by the descriptor a
        worker published (input checked against its JSON Schema); its idempotency key cannot be
        computed without the code, so `key` is required then (IDEMPOTENCY_KEY_MISSING). For a
        registered job `key` may be omitted, or must equal the key the job computes."""
        job_id, run_id = new_ids(2)
        now = self.clock.now_ms()
        item = Enqueue(job, input, tenant_id, delay, run_at, on_conflict, traceparent, priority)
        store = self.descriptors
        if store is not None and isinstance(job, str) and job not in self.registry:
            request = await self._published_request(
                store, item, key, enqueued_by, now, job_id, run_id
            )
        else:
            request = self._request(item, enqueued_by, now, current_traceparent(), job_id, run_id)
            if key is not None and key != request.idempotency_key:
                raise InvalidArgumentError(
                    "key",
                    key,
                    f"omitted, or {request.idempotency_key!r}: the key job {request.name!r} "
                    "computes from this input",
                )
        (result,) = await self.driver.enqueue([request], now=now)
        return result

    async def enqueue_many(
        self, items: Sequence[Enqueue], *, enqueued_by: str | None = None
    ) -> list[EnqueueResult]:
        """One atomic write with the dedupe rule applied per item; if any item is invalid,
        nothing is written. A batch larger than one part goes to the driver in parts, so the
        database can insert one part while the next is validated."""
        if isinstance(items, str | bytes) or not isinstance(items, Sequence):
            raise InvalidArgumentError("items", items, "a list of Enqueue(job, input, ...)")
        # One instant for the whole call, the driver's included: a driver reading its own
        # "now" after the client's found run_at 1 ms ahead of it and stored the batch delayed.
        now = self.clock.now_ms()
        if len(items) > _FIRST_PART:
            return await self.driver.enqueue_parts(self._parts(items, enqueued_by, now), now=now)
        requests = self._requests(items, enqueued_by, now)
        if not requests:
            return []
        return await self.driver.enqueue(requests, now=now)

    # --- outbox (engine/outbox.py) --------------------------------------------------------------

    async def stage(
        self,
        tx: Any,
        job: JobRef,
        input: BaseModel | Mapping[str, Any],
        *,
        tenant_id: str | None = None,
        delay: float | None = None,
        run_at: int | None = None,
        traceparent: str | None = None,
        enqueued_by: str | None = None,
        priority: int | None = None,
    ) -> StagedJob:
        """Enqueue inside the application's open transaction `tx`: the job exists if and only
        if `tx` commits (a relay publishes it). `OUTBOX_NO_TX` when `tx` is not in one."""
        item = Enqueue(
            job, input, tenant_id, delay, run_at, traceparent=traceparent, priority=priority
        )
        (staged,) = await self.stage_many(tx, [item], enqueued_by=enqueued_by)
        return staged

    async def stage_many(
        self, tx: Any, items: Sequence[Enqueue], *, enqueued_by: str | None = None
    ) -> list[StagedJob]:
        """`stage` for a batch: every item validated first, then one write through `tx`."""
        if isinstance(items, str | bytes) or not isinstance(items, Sequence):
            raise InvalidArgumentError("items", items, "a list of Enqueue(job, input, ...)")
        items = [item if type(item) is Enqueue else _item(i, item) for i, item in enumerate(items)]
        for item in items:
            # A duplicate is found when the relay publishes, after `tx` committed: too late to
            # raise to anyone, so staged jobs always dedupe.
            if item.on_conflict != "dedupe":
                raise InvalidArgumentError(
                    "on_conflict", item.on_conflict, "'dedupe' for a staged job"
                )
        requests = self._requests(items, enqueued_by)
        ids = await self.driver.outbox_stage(tx, requests)
        if not self.outbox_in_use:
            self.outbox_in_use = True
            hooks, self._first_stage = self._first_stage, []
            for hook in hooks:
                hook()
        return [
            StagedJob(outbox_id=i, job_id=r.id, run_id=r.run_id)
            for i, r in zip(ids, requests, strict=True)
        ]

    def on_first_stage(self, hook: Callable[[], None]) -> None:
        """Call `hook` when this client first stages a job (at once if it has)."""
        if self.outbox_in_use:
            hook()
        else:
            self._first_stage.append(hook)

    # --- read ---------------------------------------------------------------------------------

    async def get(self, job_id: str, *, tenant_id: str | None = None) -> JobRecord:
        return await self.driver.get(*_addressed(job_id, tenant_id))

    async def list(
        self,
        *,
        state: JobState | Sequence[JobState] | None = None,
        name: str | None = None,
        queue: str | None = None,
        tenant_id: str | None = None,
        limit: int = _DEFAULT_LIST_PAGE,
        cursor: str | None = None,
    ) -> JobPage:
        if state is None or isinstance(state, str):
            states: tuple[JobState, ...] | None = None if state is None else (state,)
        elif isinstance(state, list | tuple | set | frozenset):
            states = tuple(state) or None
        else:
            raise InvalidArgumentError("state", state, f"one or a list of {', '.join(JOB_STATES)}")
        for s in states or ():
            if type(s) is not str or s not in JOB_STATES:
                raise InvalidArgumentError("state", s, f"one of {', '.join(JOB_STATES)}")
        wanted = JobFilter(
            states=states,
            name=bounds.optional_text("name", name, MAX_NAME_BYTES),
            queue=bounds.optional_text("queue", queue, MAX_QUEUE_BYTES),
            tenant_id=bounds.optional_text("tenant_id", tenant_id, MAX_TENANT_BYTES),
            limit=bounds.whole("limit", limit, 1, MAX_PAGE),
        )
        if cursor is not None:
            # Drivers page by the last id; callers only ever see it encoded and checked.
            first_page = NextCall(tool="list_jobs", arguments=_list_arguments(wanted))
            after = paging.parse_list_cursor(cursor, first_page)
            wanted = wanted.model_copy(update={"cursor": after})
        page = await self.driver.list_jobs(wanted)
        if page.next_cursor is None:
            return page
        return page.model_copy(update={"next_cursor": paging.list_cursor(page.next_cursor)})

    async def select(
        self,
        *,
        state: JobState | Sequence[JobState] | None = None,
        name: str | None = None,
        queue: str | None = None,
        tenant_id: str | None = None,
        error_code: str | None = None,
        changed_after: int | None = None,
        changed_before: int | None = None,
        limit: int = MAX_PAGE,
        scan_limit: int = SELECT_SCAN_LIMIT,
    ) -> JobSelection:
        """Up to `limit` jobs matching every filter given, newest first: `list`'s filters, the
        stored `last_error.code`, and a window on `updated_at` (the job's last change: when a
        settled job settled), `changed_after <= updated_at < changed_before`.

        The last two are applied here over pages of `list` rather than in each driver's SQL
        (a legacy text `last_error` decodes to its code only in Python), so every driver
        answers alike; the read is bounded by `scan_limit` rows instead, and says when it
        stopped short (`scan_capped`) so a caller narrows the filter rather than acting on a
        partial match it takes for the whole."""
        error_code = bounds.optional_text("error_code", error_code, MAX_NAME_BYTES)
        after = None
        if changed_after is not None:
            after = bounds.whole("changed_after", changed_after, 0, _MAX_EPOCH_MS, "epoch ms")
        before = None
        if changed_before is not None:
            before = bounds.whole("changed_before", changed_before, 0, _MAX_EPOCH_MS, "epoch ms")
        limit = bounds.whole("limit", limit, 1, MAX_PAGE)
        scan_limit = bounds.whole("scan_limit", scan_limit, 1, 100 * MAX_PAGE, "rows")
        found: builtins.list[JobRecord] = []
        scanned = 0
        cursor: str | None = None
        while True:
            page = await self.list(
                state=state,
                name=name,
                queue=queue,
                tenant_id=tenant_id,
                limit=min(MAX_PAGE, scan_limit - scanned),
                cursor=cursor,
            )
            for job in page.jobs:
                scanned += 1
                if not _matches(job, error_code, after, before):
                    continue
                if len(found) == limit:
                    return JobSelection(found, more=True, scanned=scanned, scan_capped=False)
                found.append(job)
            if page.next_cursor is None:
                return JobSelection(found, more=False, scanned=scanned, scan_capped=False)
            if scanned >= scan_limit:
                return JobSelection(found, more=False, scanned=scanned, scan_capped=True)
            cursor = page.next_cursor

    async def trace(
        self,
        job_id: str,
        *,
        tenant_id: str | None = None,
        steps_limit: int = paging.DEFAULT_TRACE_PAGE,
        steps_cursor: str | None = None,
        events_limit: int = paging.DEFAULT_TRACE_PAGE,
        events_cursor: str | None = None,
    ) -> JobTrace:
        """The record and one page of its history: the newest `steps_limit` steps and
        `events_limit` events (each before its cursor when given), the totals, and a cursor for
        each when older ones remain. A job with 20,000 steps answers a page, not the run."""
        job_id, tenant_id = _addressed(job_id, tenant_id)
        # The fix of a cursor that does not decode: the same page from the newest.
        newest = NextCall(tool="inspect_job", arguments={"job_id": job_id})
        if steps_cursor is not None:
            paging.parse_step_cursor(steps_cursor, newest)
        if events_cursor is not None:
            paging.parse_event_cursor(events_cursor, newest)
        query = TraceQuery(
            steps_limit=bounds.whole("steps_limit", steps_limit, 1, paging.MAX_TRACE_PAGE),
            steps_cursor=steps_cursor,
            events_limit=bounds.whole("events_limit", events_limit, 1, paging.MAX_TRACE_PAGE),
            events_cursor=events_cursor,
        )
        page = await self.driver.load_trace(job_id, tenant_id, query)
        definition = self.registry.get(page.job.name)
        return JobTrace(
            **dict(page),
            retry_delays_ms=retry_schedule(definition.retry) if definition else [],
            registered=definition is not None,
        )

    async def stats(
        self, queues: Sequence[str] | None = None, *, tenant_id: str | None = None
    ) -> builtins.list[QueueStats]:
        """Per-queue counts (rule 7), of one tenant's jobs when `tenant_id` is given."""
        tenant_id = bounds.optional_text("tenant_id", tenant_id, MAX_TENANT_BYTES)
        if queues is not None:
            if isinstance(queues, str | bytes) or not isinstance(queues, Sequence):
                raise InvalidArgumentError("queues", queues, "a list of queue names, or None")
            bounds.whole("queues", len(queues), 0, MAX_QUEUES, "queue names")
            queues = [bounds.text("queues", q, MAX_QUEUE_BYTES) for q in queues]
        return await self.driver.stats(queues, tenant_id=tenant_id)

    async def describe(self, name: str | None = None) -> builtins.list[JobDescriptor]:
        """The jobs this client can enqueue, by name: those registered here (`source:
        "registry"`) and those only a worker published (`source: "published"`, `stale` when no
        worker published them within the live-worker window). A name known both ways is
        described by the registry. `name`: that job only (JOB_UNKNOWN listing both kinds)."""
        store = self.descriptors
        if name is not None:
            found = self.registry.get(name) if isinstance(name, str) else None
            if found is not None or store is None:
                return [from_registry(self._definition(name, "name").describe())]
            name = bounds.text("name", name, MAX_NAME_BYTES)
            published = await self._published(store, name)
            if not published:
                raise JobUnknownError(name, await self._known_names(store))
            return published
        local = [from_registry(d.describe()) for d in self.registry]
        if store is None:
            return local
        published = [d for d in await self._published(store) if d.name not in self.registry]
        return sorted([*local, *published], key=lambda d: d.name)

    async def _published(
        self, store: DescriptorStore, name: str | None = None
    ) -> builtins.list[JobDescriptor]:
        now = self.clock.now_ms()
        return [judged(d, now) for d in await store.published_descriptors(name)]

    # --- operate ------------------------------------------------------------------------------

    async def cancel(
        self, job_id: str, *, tenant_id: str | None = None, actor: str | None = None
    ) -> JobRecord:
        job_id, tenant_id = _addressed(job_id, tenant_id)
        actor = bounds.optional_text("actor", actor, MAX_ACTOR_BYTES)
        return await self.driver.cancel(job_id, tenant_id, actor)

    async def retry(
        self,
        job_id: str,
        *,
        tenant_id: str | None = None,
        include_cancelled: bool = False,
        actor: str | None = None,
        from_step: str | None = None,
    ) -> JobRecord:
        """Requeue a failed or dead job in its run (completed steps replay). With `from_step`,
        rerun it (a done job too) in a NEW run from that step: engine/reruns.py."""
        job_id, tenant_id = _addressed(job_id, tenant_id)
        include_cancelled = bounds.flag("include_cancelled", include_cancelled)
        actor = bounds.optional_text("actor", actor, MAX_ACTOR_BYTES)
        from_step = bounds.optional_text("from_step", from_step, MAX_NAME_BYTES)
        if from_step is None:
            return await self.driver.retry(job_id, tenant_id, include_cancelled, actor)
        store = require(self.driver, RERUNS)
        (run_id,) = new_ids(1)
        return await store.rerun(job_id, tenant_id, from_step, include_cancelled, actor, run_id)

    async def run_steps(
        self, job_id: str, run_id: str, *, tenant_id: str | None = None
    ) -> builtins.list[StepRecord]:
        """The steps of one run of this job, a previous one included (`rerun_of`), in order."""
        job_id, tenant_id = _addressed(job_id, tenant_id)
        run_id = bounds.text("run_id", run_id, MAX_ID_BYTES)
        return await require(self.driver, RERUNS).run_steps(job_id, run_id, tenant_id)

    # --- pause (engine/pauses.py) ------------------------------------------------------------

    def _pause_store(self) -> PauseStore:
        # Asked per call, not at setup: a driver without pauses serves everything else.
        return require(self.driver, PAUSES)

    async def pause(
        self,
        *,
        queue: str | None = None,
        job: str | None = None,
        actor: str | None = None,
        reason: str | None = None,
    ) -> pause_rules.Paused:
        """Stop claims of `queue`'s waiting jobs, or of every job named `job` (exactly one),
        in every process on this database, from the next claim after this returns. Running
        jobs finish; held jobs stay waiting and keep counting in the stats. Pausing what is
        paused already changes nothing and answers `already_paused=True`."""
        kind, name = pause_rules.target(queue, job)
        actor = pause_rules.checked_actor(actor)
        reason = pause_rules.checked_reason(reason)
        store = self._pause_store()
        found, before = await store.pause(kind, name, actor, reason, self.clock.now_ms())
        return pause_rules.Paused(found, before)

    async def resume(self, *, queue: str | None = None, job: str | None = None) -> Pause | None:
        """Lift the pause of `queue` or `job` (exactly one): the pause lifted, or None when
        none was in force (nothing changed)."""
        kind, name = pause_rules.target(queue, job)
        return await self._pause_store().resume(kind, name)

    async def pauses(self) -> builtins.list[Pause]:
        """Every pause in force, by (kind, name)."""
        return await self._pause_store().pauses()

    async def send_event(
        self, name: str, key: str, payload: Any = None, *, tenant_id: str | None = None
    ) -> EventSent:
        """Store the event (name, key) with `payload` for `tenant_id` (None: tenantless) and
        wake every suspended job waiting for it, in one transaction: `ctx.step.wait_for_event`
        receives it. Kept for `event_window` (a wait that starts within it still matches);
        broadcast, never consumed. Answers the event's id and how many waiting jobs woke."""
        name = event_rules.checked_name(name)
        key = event_rules.checked_key(key)
        tenant_id = event_rules.checked_tenant(tenant_id)
        event_rules.checked_payload(payload)
        store = require(self.driver, EVENTS)
        now = self.clock.now_ms()
        event = InboundEvent(
            id=new_ids(1)[0],
            name=name,
            key=key,
            tenant_id=tenant_id,
            payload=payload,
            sent_at=now,
            expires_at=now + self.event_window_ms,
        )
        woken = await store.send_event(event, now)
        return EventSent(event.id, woken)

    async def record_event(
        self,
        kind: str,
        *,
        job_id: str | None = None,
        actor: str | None = None,
        tenant_id: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        if data is not None:
            if not isinstance(data, dict):
                raise InvalidArgumentError("data", data, "a dict of JSON values, or None")
            bounds.payload("data", data, self.max_payload_bytes)
        await self.driver.record_event(
            EventRecord(
                job_id=bounds.optional_text("job_id", job_id, MAX_ID_BYTES),
                at=self.clock.now_ms(),
                kind=bounds.text("kind", kind, MAX_ACTOR_BYTES),
                actor=bounds.optional_text("actor", actor, MAX_ACTOR_BYTES),
                tenant_id=bounds.optional_text("tenant_id", tenant_id, MAX_TENANT_BYTES),
                data=data,
            )
        )

    async def migrate(self) -> None:
        await self.driver.migrate()

    async def close(self) -> None:
        await self.settler.idle()  # writes in flight commit before the connections go
        await self.driver.close()

    async def __aenter__(self) -> Jobs:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def connect(
    url: str | None = None,
    *,
    clock: Clock | None = None,
    registry: JobRegistry | None = None,
    migrate: bool = True,
    max_payload_bytes: int | None = None,
    event_window: float | None = None,
    **driver_options: Any,
) -> Jobs:
    """Connect to `url` (`memory://`, `sqlite:///path.db`, `postgresql://…`); with no URL,
    `MCP_JOBS_DATABASE_URL`, else the SQLite file `./.mcp-jobs/jobs.db`. Migrates by default.
    `max_payload_bytes`: the largest job input accepted (else `MCP_JOBS_MAX_PAYLOAD_BYTES`,
    else 1 MiB of JSON)."""
    limit = bounds.payload_limit(max_payload_bytes)  # refused before a connection is opened
    driver = open_driver(url, clock=clock, **driver_options)
    if migrate:
        await driver.migrate()
    return Jobs(
        driver,
        registry=registry,
        clock=clock,
        max_payload_bytes=limit,
        event_window=event_window,
    )


__all__ = ["Enqueue", "JobDuplicateError", "Jobs", "connect"]
