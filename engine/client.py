"""The jobs client: what application code and the MCP server call. `jobs = await connect(url)`."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from engine import bounds, paging
from engine import inbound_events as event_rules
from engine import pauses as pause_rules
from engine.bounds import (
    MAX_ACTOR_BYTES,
    MAX_ID_BYTES,
    MAX_NAME_BYTES,
    MAX_PAGE,
    MAX_QUEUE_BYTES,
    MAX_QUEUES,
    MAX_TENANT_BYTES,
)
from engine.clock import Clock, agree
from engine.declare import JobRegistry, default_registry
from engine.descriptors import IdempotencyKeyMissingError, app_modules, from_registry, judged
from engine.drivers import open_driver, resolve_url
from engine.drivers.base import (
    DESCRIPTORS,
    EVENTS,
    PAUSES,
    RECORD_BOUNDS,
    RERUNS,
    SETTLED,
    DescriptorStore,
    Driver,
    PauseStore,
    require,
)
from engine.enqueue_items import (
    FIRST_PART,
    Enqueue,
    EnqueueItems,
    JobRef,
    as_item,
    within_batch,
)
from engine.errors import (
    NOTHING_NEAR,
    InvalidArgumentError,
    JobDuplicateError,
    JobsError,
)
from engine.fix_lines import (
    MEMORY_URL,
    CommandContext,
    fixes_written,
    importable_anywhere,
    leaf_fixes_written,
)
from engine.ids import new_ids
from engine.inbound_events import (
    DEFAULT_EVENT_WINDOW_MS,
    EventSent,
    InboundEvent,
    checked_window_ms,
)
from engine.internal_jobs import refuse_rerun
from engine.job_selection import SELECT_SCAN_LIMIT, JobSelection, select_pages, stored_error_code
from engine.reruns import RunNotFoundError
from engine.retry import retry_schedule
from engine.settle import Settler
from engine.settled_counts import MAX_MS as MAX_EPOCH_MS
from engine.settled_counts import checked_interval
from engine.tracing import current_traceparent
from schemas.descriptor import JobDescriptor
from schemas.errors import NextCall
from schemas.events import EventRecord
from schemas.jobs import (
    EnqueueRequest,
    EnqueueResult,
    JobFilter,
    JobPage,
    JobRecord,
    OnConflict,
)
from schemas.outbox import StagedJob
from schemas.pauses import Pause
from schemas.states import JOB_STATES, JobState
from schemas.stats import QueueStats, SettledCount
from schemas.steps import StepRecord
from schemas.trace import JobTrace, TraceQuery

_DEFAULT_LIST_PAGE = 50
# Pages of events read, at most, to name a job's runs (a refusal's, so bounded, not exact for a
# job with more events than that).
RUNS_PAGES = 20
# An epoch-ms window bound beyond this is no instant a row holds (JavaScript's safe integer).
_MAX_EPOCH_MS = 2**53 - 1


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


def _kept(
    parts: Iterator[builtins.list[EnqueueRequest]], into: builtins.list[EnqueueRequest]
) -> Iterator[builtins.list[EnqueueRequest]]:
    """`parts`, each also added to `into` as the driver takes it (a refusal is read against
    the items built so far)."""
    for part in parts:
        into.extend(part)
        yield part


def _distinct_names(queues: Sequence[object]) -> object:
    """Queue names over the bound, each once, when that is within it (the same stats asked):
    a refusal's nearest value; else none."""
    if not all(type(q) is str for q in queues):
        return NOTHING_NEAR
    distinct = builtins.list(dict.fromkeys(queues))
    return distinct if len(distinct) <= MAX_QUEUES else NOTHING_NEAR


def _nearest_instant(refused: InvalidArgumentError, since_ms: object) -> object:
    """The bound nearest to a refused `settled_counts` window end: a whole number past a
    bound is that bound, an `until_ms` before `since_ms` is `since_ms` (an empty window)."""
    value = refused.value
    if type(value) is not int:
        return NOTHING_NEAR
    nearest = min(max(value, 0), MAX_EPOCH_MS)
    if refused.argument == "until_ms" and type(since_ms) is int and 0 <= since_ms <= MAX_EPOCH_MS:
        nearest = max(nearest, since_ms)
    return nearest


class Jobs:
    """A connected jobs client over one driver and one registry of declarations."""

    # A refusal of one of its methods' arguments is that call mended (engine/fix_lines.py
    # `mend_call`), written on `jobs` as the README names the client.
    is_jobs_client = True

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
        # What turns enqueue items into checked requests (engine/enqueue_items.py).
        # `records`: a driver whose job record is bounded by a setting of its own (NATS) names
        # that setting too where this client's bound refuses an input.
        self.items = EnqueueItems(
            self.registry,
            self.descriptors,
            self.max_payload_bytes,
            require(driver, RECORD_BOUNDS) if RECORD_BOUNDS.offered_by(driver) else None,
        )
        # Written into the `mcp-jobs …` fix of every error leaving this client's methods
        # (engine/fix_lines.py): `connect` sets it. None: the lines are left as raised (a face
        # writes its own, whole context into them: mcp_jobs/fix_context.py). A memory store's
        # is known here already: a bare line run in a shell would open another database.
        self.fix_context: CommandContext | None = (
            CommandContext.of(MEMORY_URL, self.app_names)
            if getattr(driver, "kind", None) == "memory"
            else None
        )

    def app_names(self) -> tuple[str, ...]:
        """The modules that declared this client's jobs (the engine's own left out), for a fix
        line's `--app`: none when one cannot be named from another directory (a script's
        `__main__`, a module found only beside it), rather than a guess."""
        modules = app_modules(self.registry)
        cwd = Path.cwd()
        return tuple(modules) if all(importable_anywhere(m, cwd) for m in modules) else ()

    def _leaving(self, exc: BaseException, call: str) -> None:
        """`exc` as it leaves `call` of the Python API (one no literal call can be written of:
        its items or transaction): a fix that is the call's own shape (IDEMPOTENCY_KEY_MISSING)
        in that call's, and this client's context written in."""
        if isinstance(exc, IdempotencyKeyMissingError):
            exc.raised_through(call)
        if self.fix_context is not None:  # None: a face's client, which writes its own fix
            self.fix_context.write_into(exc)

    # --- enqueue ------------------------------------------------------------------------------

    @leaf_fixes_written
    async def enqueue(
        self,
        job: JobRef,
        input: BaseModel | Mapping[str, Any],
        *,
        tenant_id: str | None = None,
        delay: float | None = None,
        run_at: int | datetime | str | None = None,
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
        await agree(self.clock)  # before a time another machine compares is read
        now = self.clock.now_ms()
        job_id, run_id = new_ids(2, now)
        item = Enqueue(
            job, input, tenant_id, delay, run_at, on_conflict, traceparent, priority, key
        )
        request = await self.items.one(
            item, enqueued_by, now, current_traceparent(), job_id, run_id
        )
        (result,) = await self.driver.enqueue([request], now=now)
        return result

    async def enqueue_many(
        self, items: Sequence[Enqueue], *, enqueued_by: str | None = None
    ) -> list[EnqueueResult]:
        """One atomic write with the dedupe rule applied per item; if any item is invalid,
        nothing is written. A batch larger than one part goes to the driver in parts, so the
        database can insert one part while the next is validated."""
        try:
            if isinstance(items, str | bytes) or not isinstance(items, Sequence):
                raise InvalidArgumentError("items", items, "a list of Enqueue(job, input, ...)")
            # One instant for the whole call, the driver's included: a driver reading its
            # own "now" after the client's found run_at 1 ms ahead and stored the batch late.
            await agree(self.clock)
            now = self.clock.now_ms()
            built: builtins.list[EnqueueRequest] = []
            try:
                # In parts only when every job is registered here: a published one is resolved
                # against its descriptor, a read away.
                if len(items) > FIRST_PART and all(
                    self.items.published_only(getattr(item, "job", None)) is None for item in items
                ):
                    return await self.driver.enqueue_parts(
                        _kept(self.items.parts(items, enqueued_by, now), built), now=now
                    )
                built = await self.items.resolve(items, enqueued_by, now, current_traceparent())
                if not built:
                    return []
                return await self.driver.enqueue(built, now=now)
            except JobDuplicateError as duplicate:
                found = within_batch(duplicate, built)
                if found is duplicate:
                    raise
                raise found from duplicate
        except (JobsError, BaseExceptionGroup) as exc:
            self._leaving(exc, "enqueue_many")
            raise

    # --- outbox (engine/outbox.py) --------------------------------------------------------------

    @leaf_fixes_written
    async def stage(
        self,
        tx: Any,
        job: JobRef,
        input: BaseModel | Mapping[str, Any],
        *,
        tenant_id: str | None = None,
        delay: float | None = None,
        run_at: int | datetime | str | None = None,
        traceparent: str | None = None,
        enqueued_by: str | None = None,
        priority: int | None = None,
        key: str | None = None,
    ) -> StagedJob:
        """Enqueue inside the application's open transaction `tx`: the job exists if and only
        if `tx` commits (a relay publishes it). `OUTBOX_NO_TX` when `tx` is not in one. `key`
        as for `enqueue`: required for a job known only by its published descriptor."""
        item = Enqueue(
            job,
            input,
            tenant_id,
            delay,
            run_at,
            traceparent=traceparent,
            priority=priority,
            key=key,
        )
        try:
            (staged,) = await self.stage_many(tx, [item], enqueued_by=enqueued_by)
            return staged
        except (JobsError, BaseExceptionGroup) as exc:
            self._leaving(exc, "stage")
            raise

    async def stage_many(
        self, tx: Any, items: Sequence[Enqueue], *, enqueued_by: str | None = None
    ) -> list[StagedJob]:
        """`stage` for a batch: every item validated first, then one write through `tx`."""
        try:
            if isinstance(items, str | bytes) or not isinstance(items, Sequence):
                raise InvalidArgumentError("items", items, "a list of Enqueue(job, input, ...)")
            items = [
                item if type(item) is Enqueue else as_item(i, item) for i, item in enumerate(items)
            ]
            for item in items:
                # A duplicate is found when the relay publishes, after `tx` committed: too late to
                # raise to anyone, so staged jobs always dedupe.
                if item.on_conflict != "dedupe":
                    raise InvalidArgumentError(
                        "on_conflict", item.on_conflict, "'dedupe' for a staged job"
                    )
            await agree(self.clock)
            now = self.clock.now_ms()
            requests = await self.items.resolve(items, enqueued_by, now, current_traceparent())
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
        except (JobsError, BaseExceptionGroup) as exc:
            self._leaving(exc, "stage_many")
            raise

    def on_first_stage(self, hook: Callable[[], None]) -> None:
        """Call `hook` when this client first stages a job (at once if it has)."""
        if self.outbox_in_use:
            hook()
        else:
            self._first_stage.append(hook)

    # --- read ---------------------------------------------------------------------------------

    @fixes_written
    async def get(self, job_id: str, *, tenant_id: str | None = None) -> JobRecord:
        return await self.driver.get(*_addressed(job_id, tenant_id))

    @fixes_written
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
        bounds.narrowing("state", state, "every state")
        if state is None or isinstance(state, str):
            states: tuple[JobState, ...] | None = None if state is None else (state,)
        elif isinstance(state, list | tuple | set | frozenset):
            states = tuple(state)
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
            after = paging.parse_list_cursor(cursor, wanted, first_page)
            wanted = wanted.model_copy(update={"cursor": after})
        page = await self.driver.list_jobs(wanted)
        if page.next_cursor is None:
            return page
        next_cursor = paging.list_cursor(page.next_cursor, wanted)
        return page.model_copy(update={"next_cursor": next_cursor})

    @fixes_written
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
        count: bool = False,
    ) -> JobSelection:
        """Up to `limit` jobs matching every filter given, newest first: `list`'s filters, the
        stored `last_error.code`, and a window on `updated_at` (the job's last change: when a
        settled job settled), `changed_after <= updated_at < changed_before`.

        The last two are applied here over pages of `list` rather than in each driver's SQL
        (a legacy text `last_error` decodes to its code only in Python), so every driver
        answers alike; the read is bounded by `scan_limit` rows instead, and says when it
        stopped short (`scan_capped`) so a caller narrows the filter rather than acting on a
        partial match it takes for the whole. With `count` it reads on past `limit`, within the
        same `scan_limit`, to count the matches (`matching`)."""
        error_code = stored_error_code(
            bounds.optional_text("error_code", error_code, MAX_NAME_BYTES)
        )
        after = None
        if changed_after is not None:
            after = bounds.whole("changed_after", changed_after, 0, _MAX_EPOCH_MS, "epoch ms")
        before = None
        if changed_before is not None:
            before = bounds.whole("changed_before", changed_before, 0, _MAX_EPOCH_MS, "epoch ms")
        limit = bounds.whole("limit", limit, 1, MAX_PAGE)
        scan_limit = bounds.whole("scan_limit", scan_limit, 1, 100 * MAX_PAGE, "rows")

        async def page_of(size: int, cursor: str | None) -> JobPage:
            return await self.list(
                state=state, name=name, queue=queue, tenant_id=tenant_id, limit=size, cursor=cursor
            )

        return await select_pages(page_of, error_code, after, before, limit, scan_limit, count)

    @fixes_written
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
            paging.parse_step_cursor(steps_cursor, job_id, newest)
        if events_cursor is not None:
            paging.parse_event_cursor(events_cursor, job_id, newest)
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

    @fixes_written
    async def stats(
        self, queues: Sequence[str] | None = None, *, tenant_id: str | None = None
    ) -> builtins.list[QueueStats]:
        """Per-queue counts (rule 7), of one tenant's jobs when `tenant_id` is given."""
        tenant_id = bounds.optional_text("tenant_id", tenant_id, MAX_TENANT_BYTES)
        if queues is not None:
            if isinstance(queues, str | bytes) or not isinstance(queues, Sequence):
                raise InvalidArgumentError("queues", queues, "a list of queue names, or None")
            if len(queues) > MAX_QUEUES:
                raise InvalidArgumentError(
                    "queues",
                    queues,
                    f"a list of at most {MAX_QUEUES} queue names, or None",
                    nearest=_distinct_names(queues),
                )
            queues = [bounds.text("queues", q, MAX_QUEUE_BYTES) for q in queues]
        await agree(self.driver.clock)  # what is due, and whose lease is over, is by its time
        return await self.driver.stats(queues, tenant_id=tenant_id)

    @fixes_written
    async def settled_counts(
        self, since_ms: int, until_ms: int, *, tenant_id: str | None = None
    ) -> dict[str, SettledCount] | None:
        """Per queue, the jobs that settled with `since_ms <= finished_at < until_ms`, by state
        (engine/settled_counts.py); None when the driver cannot count them exactly."""
        try:
            since_ms, until_ms = checked_interval(since_ms, until_ms)
        except InvalidArgumentError as exc:
            exc.nearest = _nearest_instant(exc, since_ms)  # the caller's call, mended
            raise
        tenant_id = bounds.optional_text("tenant_id", tenant_id, MAX_TENANT_BYTES)
        if not SETTLED.offered_by(self.driver):
            return None
        store = require(self.driver, SETTLED)
        return await store.settled_counts(since_ms, until_ms, tenant_id=tenant_id)

    @fixes_written
    async def describe(self, name: str | None = None) -> builtins.list[JobDescriptor]:
        """The jobs this client can enqueue, by name: those registered here (`source:
        "registry"`) and those only a worker published (`source: "published"`, `stale` when no
        worker published them within the live-worker window). A name known both ways is
        described by the registry. `name`: that job only (JOB_UNKNOWN listing both kinds)."""
        store = self.descriptors
        if name is not None:
            found = self.registry.get(name) if isinstance(name, str) else None
            if found is not None or store is None:
                return [from_registry(self.items.definition(name, "name").describe())]
            name = bounds.text("name", name, MAX_NAME_BYTES)
            published = await self._published(store, name)
            if not published:
                raise self.registry.unknown(name, await self.items.known_names(store))
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

    @fixes_written
    async def cancel(
        self, job_id: str, *, tenant_id: str | None = None, actor: str | None = None
    ) -> JobRecord:
        job_id, tenant_id = _addressed(job_id, tenant_id)
        actor = bounds.optional_actor("actor", actor)
        await agree(self.driver.clock)
        return await self.driver.cancel(job_id, tenant_id, actor)

    @fixes_written
    async def retry(
        self,
        job_id: str,
        *,
        tenant_id: str | None = None,
        include_cancelled: bool = False,
        actor: str | None = None,
        from_step: str | None = None,
    ) -> JobRecord:
        """Requeue a failed or dead job in its run (completed steps replay; attempts start again
        from 0), or run a delayed one now instead of at its run_at (its attempt count kept: a
        retry's backoff cut short is no new budget). With `from_step`, rerun
        it (a done job too) in a NEW run from that step: engine/reruns.py."""
        job_id, tenant_id = _addressed(job_id, tenant_id)
        include_cancelled = bounds.flag("include_cancelled", include_cancelled)
        actor = bounds.optional_actor("actor", actor)
        from_step = bounds.optional_text("from_step", from_step, MAX_NAME_BYTES)
        await agree(self.driver.clock)
        if from_step is None:
            return await self.driver.retry(job_id, tenant_id, include_cancelled, actor)
        store = require(self.driver, RERUNS)
        # A job's name never changes, so this read cannot race the rerun.
        refuse_rerun(await self.driver.get(job_id, tenant_id))
        (run_id,) = new_ids(1)
        return await store.rerun(job_id, tenant_id, from_step, include_cancelled, actor, run_id)

    @fixes_written
    async def run_steps(
        self, job_id: str, run_id: str, *, tenant_id: str | None = None
    ) -> builtins.list[StepRecord]:
        """The steps of one run of this job, a previous one included (`rerun_of`), in order."""
        job_id, tenant_id = _addressed(job_id, tenant_id)
        run_id = bounds.text("run_id", run_id, MAX_ID_BYTES)
        steps = await require(self.driver, RERUNS).run_steps(job_id, run_id, tenant_id)
        if not steps:
            job = await self.get(job_id, tenant_id=tenant_id)
            # Every earlier run holds at least the step it was rerun from (engine/reruns.py):
            # a run id with no steps that is not the current run is none of this job's.
            if run_id != job.run_id:
                raise RunNotFoundError(job_id, run_id, await self.runs(job, tenant_id=tenant_id))
        return steps

    @fixes_written
    async def runs(self, job: JobRecord, *, tenant_id: str | None = None) -> builtins.list[str]:
        """The job's runs, newest first: the current one, then each one a rerun left behind, as
        the reruns' `requeued` events name them (`engine.reruns.rerun_event_data`); the events
        read are bounded (RUNS_PAGES pages), so a job with more names only the newest runs."""
        if not isinstance(job, JobRecord):
            raise InvalidArgumentError("job", job, "a JobRecord, as `await jobs.get(job_id)`")
        runs: builtins.list[object] = [job.run_id, job.rerun_of]
        cursor = None
        for _ in range(RUNS_PAGES):
            page = await self.trace(
                job.id,
                tenant_id=tenant_id,
                steps_limit=1,
                events_limit=paging.MAX_TRACE_PAGE,
                events_cursor=cursor,
            )
            for event in reversed(page.events):  # a page is oldest first
                data = event.data or {}
                if event.kind == "requeued" and "previous_run_id" in data:
                    runs += [data.get("run_id"), data["previous_run_id"]]
            cursor = page.events_cursor
            if cursor is None:
                break
        return builtins.list(dict.fromkeys(run for run in runs if isinstance(run, str)))

    # --- pause (engine/pauses.py) ------------------------------------------------------------

    def _pause_store(self) -> PauseStore:
        # Asked per call, not at setup: a driver without pauses serves everything else.
        return require(self.driver, PAUSES)

    @fixes_written
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
        (kind, name), actor, reason = pause_rules.written(queue, job, actor, reason)
        store = self._pause_store()
        await agree(self.clock)
        found, before = await store.pause(kind, name, actor, reason, self.clock.now_ms())
        return pause_rules.Paused(found, before)

    @fixes_written
    async def resume(self, *, queue: str | None = None, job: str | None = None) -> Pause | None:
        """Lift the pause of `queue` or `job` (exactly one): the pause lifted, or None when
        none was in force (nothing changed)."""
        kind, name = pause_rules.target(queue, job)
        return await self._pause_store().resume(kind, name)

    @fixes_written
    async def pauses(self) -> builtins.list[Pause]:
        """Every pause in force, by (kind, name)."""
        return await self._pause_store().pauses()

    @fixes_written
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
        await agree(self.clock)
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

    @fixes_written
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
        event = EventRecord(
            job_id=bounds.optional_text("job_id", job_id, MAX_ID_BYTES),
            at=0,
            kind=bounds.name("kind", kind, MAX_ACTOR_BYTES),
            actor=bounds.optional_actor("actor", actor),
            tenant_id=bounds.optional_text("tenant_id", tenant_id, MAX_TENANT_BYTES),
            data=data,
        )
        if event.job_id is not None:
            # JOB_NOT_FOUND: an event of no stored job would outlive every retention rule (a
            # job's events go with the job, events of no job are those recorded without one).
            await self.get(event.job_id)
        await agree(self.clock)
        await self.driver.record_event(event.model_copy(update={"at": self.clock.now_ms()}))

    @fixes_written
    async def migrate(self) -> None:
        await self.driver.migrate()

    async def close(self) -> None:
        """Close the driver. A worker still running on it is stopped first, as `stop()` would
        (its jobs in flight finish or go back unharmed), and its `run()` raises DRIVER_CLOSED."""
        from engine.worker_runs import stop_runs_over  # no cycle: it imports nothing of ours

        await stop_runs_over(self.driver)
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
    if clock is not None and not (callable(getattr(clock, "now_ms", None))):
        raise InvalidArgumentError("clock", clock, "a Clock (now_ms() and sleep_ms(ms)) or None")
    if registry is not None and not isinstance(registry, JobRegistry):
        raise InvalidArgumentError("registry", registry, "a JobRegistry or None")
    bounds.flag("migrate", migrate)
    driver = open_driver(url, clock=clock, **driver_options)
    if migrate:
        await driver.migrate()  # its fixes (`db migrate`, `db report`) name the database
    jobs = Jobs(
        driver,
        registry=registry,
        clock=driver.clock,  # `clock`, or this machine's read as the server reads time
        max_payload_bytes=limit,
        event_window=event_window,
    )
    # Its fix lines name this database (a relative SQLite path as opened from here) and app.
    jobs.fix_context = CommandContext.of(
        resolve_url(url), jobs.app_names, own_registry=jobs.registry is not default_registry
    )
    return jobs


__all__ = ["Enqueue", "JobDuplicateError", "Jobs", "connect"]
